"""``python -m sim.nodehost``: cdo's per-node services for every node of a simulated cluster.

    python -m sim up &                              # the cluster, writes .cdo/sim/cluster.json
    CDO_NATS_URL=nats://127.0.0.1:4222 python -m sim.nodehost [--state-dir DIR] [--nodes GLOB]

It finds the cluster (kubeconfig, control API) through ``<state dir>/cluster.json``, hosts the
IMEX agent and health monitor of every node of ``--topology`` (the file the cluster was started
with) that ``--nodes`` selects, follows the cluster's power switches, and serves its control API
(fault injection) at the URL it writes to ``<state dir>/nodehost.json``. It applies cdo's
identities rendered from deploy/ (:mod:`sim.identities`), and each node's agent and monitor act
as their own ServiceAccounts with tokens bound to their node (kubeconfigs under
``<state dir>/identities/<service account>/<node>.kubeconfig``); with ``--nats-auth`` they
connect to NATS with node-bound tokens of their own too (``<state dir>/identities/nats/``).
The runtime's settings
(NATS, probe port, logging, tracing) are the usual ``CDO_*`` variables; the hosted services read
``CDO_IMEX_AGENT_*`` and ``CDO_HEALTH_*`` as their own processes do (docs/nodehost.md).
"""

from __future__ import annotations

import argparse
import asyncio
import fnmatch
import functools
import logging
import os
import sys
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider

from shared.command_errors import CommandError
from shared.errors import ConfigError
from shared.runtime import ServiceContext, run_service
from shared.runtime.service import EXIT_CONFIG
from shared.tracing import INSTRUMENTATION_NAME, setup_tracing
from sim import identities
from sim.control.http import request
from sim.control.state import IDENTITIES_DIR, ClusterFile, require_cluster
from sim.kubelet import connect_for_kubelets
from sim.nodehost.control import ControlServer, NodeHostInfo, write_info
from sim.nodehost.host import AGENT, MONITOR, NodeHost, Tracers
from sim.nodehost.power import ClusterPower
from sim.nodehost.settings import (
    NodeLayout,
    describe,
    load_host_settings,
    load_service_settings,
)
from sim.release import DeviceTaintSupport
from sim.topology import DEFAULT_TOPOLOGY, TopologyError, load_topology
from sim.topology import Node as TopologyNode

COMPONENT = "nodehost"
DEFAULT_STATE_DIR = Path(".cdo") / "sim"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m sim.nodehost",
        description="Host cdo's IMEX agent and health monitor for every simulated node.",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=DEFAULT_STATE_DIR,
        help="the simulated cluster's state directory (default: %(default)s)",
    )
    parser.add_argument(
        "--topology",
        type=Path,
        default=DEFAULT_TOPOLOGY,
        help="the topology the cluster was started with (default: the 2-rack default)",
    )
    parser.add_argument(
        "--nodes",
        default="*",
        help="which nodes to host: shell patterns, comma separated (default: all)",
    )
    parser.add_argument(
        "--imex-server-port",
        type=int,
        default=None,
        help="IMEX peer port of every node (default: CDO_IMEX_AGENT_IMEX_SERVER_PORT or 50000)",
    )
    parser.add_argument(
        "--imex-cmd-port",
        type=int,
        default=None,
        help="IMEX command port of every node (default: CDO_IMEX_AGENT_IMEX_CMD_PORT or 50005)",
    )
    parser.add_argument(
        "--nats-auth",
        action="store_true",
        help="connect each node's services to NATS with their own node-bound ServiceAccount "
        "tokens (a server with the auth callout; the host's own connection takes "
        "CDO_NATS_TOKEN_FILE, a reader's)",
    )
    parser.add_argument(
        "--settings", action="store_true", help="list the CDO_NODEHOST_* settings and exit"
    )
    return parser.parse_args(argv)


def select_nodes(nodes: list[TopologyNode], patterns: str) -> list[TopologyNode]:
    """The nodes whose names match one of the comma-separated shell patterns."""
    wanted = [pattern.strip() for pattern in patterns.split(",") if pattern.strip()]
    return [node for node in nodes if any(fnmatch.fnmatchcase(node.name, p) for p in wanted)]


def check_against_cluster(info: ClusterFile, nodes: list[TopologyNode]) -> None:
    """ConfigError when the running cluster does not have these nodes at these addresses."""
    known = {
        entry["name"]: entry["address"] for entry in request(info.control_url, "GET", "/nodes")
    }
    wrong = [
        node.name
        if node.name not in known
        else f"{node.name} ({node.address} != {known[node.name]})"
        for node in nodes
        if known.get(node.name) != node.address
    ]
    if wrong:
        raise ConfigError(
            "the running cluster was started from another topology; nodes missing or at "
            f"other addresses: {', '.join(wrong[:5])}{' ...' if len(wrong) > 5 else ''} "
            "(pass the cluster's --topology)"
        )


async def _flush(provider: TracerProvider) -> None:
    await asyncio.to_thread(provider.shutdown)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.settings:
        print(describe())
        return 0
    state_dir: Path = args.state_dir.resolve()
    try:
        topology = load_topology(args.topology)
        nodes = select_nodes(list(topology.nodes), args.nodes)
        if not nodes:
            raise ConfigError(f"--nodes {args.nodes!r} matches no node of {args.topology}")
        host_settings = load_host_settings()
        services = load_service_settings()
        ports = {
            name: value
            for name, value in (
                ("server_port", args.imex_server_port),
                ("cmd_port", args.imex_cmd_port),
            )
            if value is not None
        }
        if ports:
            services = services.with_imex(**ports)
        layout = NodeLayout(
            root=state_dir / "nodehost",
            # The simulated kubelets' directories: KubeletFleet(root=<state dir>/nodes).
            kubelet_root=lambda name: state_dir / "nodes" / name,
        )
        layout.check([node.name for node in nodes])
        info = require_cluster(state_dir)
        check_against_cluster(info, nodes)
    except (ConfigError, TopologyError) as exc:
        print(f"{COMPONENT}: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except CommandError as exc:  # no cluster runs there, or it does not answer
        print(f"{COMPONENT}: {exc}", file=sys.stderr)
        return 1

    async def setup(ctx: ServiceContext) -> None:
        if ctx.settings.log_level.lower() != "debug":
            # Every simulated daemon logs each peer it meets; the agents report what matters.
            logging.getLogger("sim.imex").setLevel(logging.WARNING)
        client = await connect_for_kubelets(
            info.kubeconfig,
            # An agent holds one watch, a monitor three (Nodes, its DeviceTaintRules, its GPU
            # ResourceSlices): two kubelets' worth of watches per node.
            kubelets=2 * len(nodes),
        )
        ctx.supervisor.on_shutdown("close kube client", client.close, phase="final")
        ctx.metrics_access.use(client)
        await identities.install(client, await identities.rendered_identities())
        providers = {
            service: setup_tracing(
                service=service, instance=ctx.instance, settings=ctx.settings.tracing
            )
            for service in (AGENT, MONITOR)
        }
        for service, provider in providers.items():
            ctx.supervisor.on_shutdown(
                f"flush {service} traces", functools.partial(_flush, provider), phase="final"
            )
        power = ClusterPower(info.control_url)
        ctx.supervisor.on_shutdown("close power source", power.close, phase="final")
        host = NodeHost(
            nodes=nodes,
            client=client,
            nats=ctx.settings.nats,
            power=power,
            layout=layout,
            tracers=Tracers(
                agent=providers[AGENT].get_tracer(INSTRUMENTATION_NAME),
                monitor=providers[MONITOR].get_tracer(INSTRUMENTATION_NAME),
            ),
            services=services,
            settings=host_settings,
            metrics=ctx.metrics,
            # The host's own client stands for each node's kubelet, which asks for the tokens
            # of the pods it runs.
            # The GPU drivers run at the cluster's release, as the cluster file records it.
            device_taints=DeviceTaintSupport.of(info.release()),
            identities=identities.NodeIdentities(
                client,
                admin_kubeconfig=Path(info.kubeconfig),
                directory=state_dir / IDENTITIES_DIR,
                nats=args.nats_auth,
            ),
        )
        ctx.readiness.add("hosted nodes", lambda: host.ready)
        server = ControlServer(
            host, host=host_settings.control_host, port=host_settings.control_port
        )
        url = await server.start()
        ctx.supervisor.on_shutdown("stop control API", server.stop, phase="final")
        written = write_info(
            state_dir,
            NodeHostInfo(
                control_url=url, pid=os.getpid(), nodes=tuple(node.name for node in nodes)
            ),
        )
        ctx.supervisor.on_shutdown(
            "remove state file", lambda: written.unlink(missing_ok=True), phase="intake"
        )
        ctx.supervisor.start("node host", host.run())
        logging.getLogger("cdo.sim.nodehost").info(
            "hosting nodes",
            extra={"nodes": len(nodes), "control_url": url, "state_file": str(written)},
        )

    return run_service(COMPONENT, setup)


if __name__ == "__main__":
    raise SystemExit(main())
