"""``python -m sim``: run the simulated cluster, power nodes off and on.

    python -m sim up [--topology FILE | --racks N] [--full-racks M] [--state-dir DIR]
                     [--api-port P] [--label-cliques]
                     [--api-in-process] [--kubernetes-version 1.34|1.35|1.36|1.37]
                     [--feature-gates Name=true,...] [--runtime-config group/version=true,...]
    python -m sim status [--state-dir DIR]
    python -m sim power off|on NODE [--state-dir DIR]

``up`` runs until Ctrl-C (or SIGTERM) and prints the kubeconfig to point kubectl and cdo's
services at. The API emulator enforces authentication and RBAC (so it serves HTTPS); the
kubeconfig holds the admin's token and the CA, and the emulator keeps its access record in
``<state dir>/access.json``. The other commands find it through ``<state dir>/cluster.json``.
The whole cluster runs at one Kubernetes release (default: the newest): the emulator presents
its APIs and gates, the scheduler and controllers follow them (:mod:`sim.release`).
``--racks N`` generates a topology of N NVL72 racks (``<state dir>/topology.yaml``, for the
node host's ``--topology``); ``--full-racks M`` gives only the first M racks a simulated kubelet
per node and makes the others' nodes hollow (:mod:`sim.hollow`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import signal
import sys
from pathlib import Path

from aiohttp import web

from shared.command_errors import CommandError
from sim.cluster import ClusterOptions, SimulatedCluster
from sim.control.api import control_app
from sim.control.http import request
from sim.control.state import (
    ACCESS_RECORD_FILE,
    API_DATA_DIR,
    AUDIT_LOG_FILE,
    CLUSTER_FILE,
    DEFAULT_STATE_DIR,
    ClusterFile,
    require_cluster,
    write_cluster,
)
from sim.kubeapi import ServerConfig
from sim.kubeapi.config import ReleaseSettings, release_settings
from sim.kubeapi.releases import ReleaseError
from sim.kubeapi.releases.flags import add_release_arguments
from sim.kubelet import KubeletSettings
from sim.topology import DEFAULT_TOPOLOGY, TopologyError
from sim.topology.generate import GENERATED_TOPOLOGY_FILE, nvl72_racks, write_topology


async def up(args: argparse.Namespace, release: ReleaseSettings) -> int:
    state_dir: Path = args.state_dir.resolve()
    # A new cluster starts empty: the API server's data is kept only across its own restarts.
    shutil.rmtree(state_dir / API_DATA_DIR, ignore_errors=True)
    topology: Path = args.topology
    if args.racks is not None:
        topology = write_topology(nvl72_racks(args.racks), state_dir / GENERATED_TOPOLOGY_FILE)
    options = ClusterOptions(
        state_dir=state_dir,
        topology=topology,
        full_racks=args.full_racks,
        api_port=args.api_port,
        label_cliques=args.label_cliques,
        api_process=not args.api_in_process,
        api=ServerConfig(
            pod_graceful_deletion=True,
            enforce_auth=True,
            access_record=str(state_dir / ACCESS_RECORD_FILE),
            audit_log=str(state_dir / AUDIT_LOG_FILE),
            # Kept on disk so that `cdo sim restart api` brings the same server back.
            data_dir=str(state_dir / API_DATA_DIR) if not args.api_in_process else "",
            **release,
        ),
        kubelet=KubeletSettings(gpu_devices="plugin" if args.device_plugins else "topology"),
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with SimulatedCluster.running(options) as cluster:
        runner = web.AppRunner(control_app(cluster), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        info = ClusterFile(
            kubeconfig=str(cluster.kubeconfig),
            api_url=cluster.url,
            control_url=f"http://127.0.0.1:{port}",
            pid=os.getpid(),
            **release,
        )
        write_cluster(state_dir, info)
        cliques = sorted({node.clique for node in cluster.topology.nodes})
        hollow = f" ({len(cluster.hollow)} hollow)" if cluster.hollow is not None else ""
        print(
            f"simulated cluster up: {len(cluster.topology.nodes)} nodes{hollow} in "
            f"{len(cliques)} cliques, Kubernetes {release['kubernetes_version']}"
        )
        print(f"  topology     {topology}")
        print(f"  API server   {cluster.url}")
        print(f"  kubeconfig   {cluster.kubeconfig}")
        print(f"  try          kubectl --kubeconfig {cluster.kubeconfig} get nodes")
        print("  Ctrl-C stops it", flush=True)
        try:
            await stop.wait()
        finally:
            (state_dir / CLUSTER_FILE).unlink(missing_ok=True)
            await runner.cleanup()
    return 0


def status(args: argparse.Namespace) -> int:
    info = require_cluster(args.state_dir)
    print(f"API server {info.api_url}  kubeconfig {info.kubeconfig}  pid {info.pid}")
    for node in request(info.control_url, "GET", "/nodes"):
        state = "on " if node["powered"] else "OFF"
        print(f"  {state} {node['name']:<20} {node['address']:<15} {node['clique']}")
    return 0


def power(args: argparse.Namespace) -> int:
    info = require_cluster(args.state_dir)
    result = request(info.control_url, "POST", f"/nodes/{args.node}/power/{args.state}")
    print(f"{result['name']}: {'on' if result['powered'] else 'off'}")
    return 0


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {value}")
    return value


def _not_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m sim", description="The simulated cluster.")
    parser.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR)
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("up", help="run the simulated cluster until Ctrl-C")
    start.add_argument("--topology", type=Path, default=DEFAULT_TOPOLOGY)
    start.add_argument(
        "--racks",
        type=_positive,
        default=None,
        help="N NVL72 racks (18 nodes of 4 GPUs, one clique each) instead of --topology; "
        "the topology is written to <state dir>/topology.yaml",
    )
    start.add_argument(
        "--full-racks",
        type=_not_negative,
        default=None,
        help="only the first M racks' nodes get a simulated kubelet each (and the node host's "
        "services); the other racks' nodes are hollow (default: every rack full)",
    )
    start.add_argument("--api-port", type=int, default=0)
    start.add_argument(
        "--label-cliques",
        action="store_true",
        help="label nodes with their clique (normally cdo's health monitor does)",
    )
    start.add_argument(
        "--api-in-process",
        action="store_true",
        help="serve the API from this process too (by default the emulator runs in a process "
        "of its own, so that it and the kubelets, scheduler and controllers use two cores)",
    )
    start.add_argument(
        "--device-plugins",
        action="store_true",
        help="nvidia.com/gpu only from device plugins registered with the kubelets, none until "
        "one registers (the node host runs NVIDIA's on every device-plugin node); by default "
        "each kubelet lists its node's GPUs itself until a plugin registers",
    )
    add_release_arguments(start)
    commands.add_parser("status", help="list the nodes of the running cluster")
    switch = commands.add_parser("power", help="power a node on or off")
    switch.add_argument("state", choices=["on", "off"])
    switch.add_argument("node")
    args = parser.parse_args()
    if getattr(args, "racks", None) is not None and args.topology != DEFAULT_TOPOLOGY:
        parser.error("--racks generates the topology: leave out --topology")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:
        if args.command == "up":
            release = release_settings(
                args.kubernetes_version, args.feature_gates, args.runtime_config
            )
            ServerConfig(**release).release()  # refused before anything starts
            raise SystemExit(asyncio.run(up(args, release)))
        raise SystemExit(status(args) if args.command == "status" else power(args))
    except TopologyError as error:
        raise SystemExit(f"bad topology: {error}") from None
    except ReleaseError as error:
        raise SystemExit(f"python -m sim up: {error}") from None
    except CommandError as error:
        raise SystemExit(str(error)) from None


if __name__ == "__main__":
    main()
