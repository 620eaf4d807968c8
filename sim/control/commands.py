"""The ``cdo sim`` command group: its arguments and what each action runs.

The ``cdo`` application (``cli/``) adds this group to its parser with :func:`add_parser`, passing
its connection options as ``common``, and hands a parsed ``sim`` command to :func:`run`. The
group lives here, beside the simulator it drives, so that the application holds no knowledge of
how the simulated cluster is started.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sim.control.down import down
from sim.control.freeze import FREEZABLE, freeze, thaw
from sim.control.nodes import clock, fault, fault_body, power
from sim.control.restart import RESTARTABLE, nats_start, nats_stop, restart
from sim.control.up import UpOptions, up
from sim.kubeapi.releases.flags import add_release_arguments

FABRIC_STATES = ("not_supported", "not_started", "in_progress", "completed")
FABRIC_PROBLEMS = (
    "degraded_bandwidth",
    "route_recovery",
    "route_unhealthy",
    "access_timeout_recovery",
)


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    *,
    common: argparse.ArgumentParser,
    epilog: str,
) -> None:
    """Add ``sim`` and its actions (up, down, power, fault, nats, restart, freeze, thaw) to
    ``commands``."""
    shared: dict[str, Any] = {"parents": [common], "epilog": epilog}
    sim = commands.add_parser(
        "sim",
        help="the simulated cluster",
        description="Run the simulated cluster in the background and act on its nodes.",
        **shared,
    )
    actions = sim.add_subparsers(dest="action", required=True, metavar="ACTION")
    _add_up(actions, shared)
    actions.add_parser(
        "down",
        help="stop what cdo sim up started",
        description="Stop the node host, the cluster and the nats-server cdo sim up started.",
        **shared,
    )
    power_parser = actions.add_parser(
        "power",
        help="switch a node off or on",
        description="Switch a simulated node's power; its kubelet and its hosted services "
        "stop (off) or boot again with healthy GPUs (on).",
        **shared,
    )
    power_parser.add_argument("state", choices=["on", "off"])
    power_parser.add_argument("node")
    _add_fault(actions, shared)
    _add_by_hand(actions, shared)


def _add_up(
    actions: argparse._SubParsersAction[argparse.ArgumentParser], shared: dict[str, Any]
) -> None:
    parser = actions.add_parser(
        "up",
        help="start NATS, the simulated cluster and cdo's services in the background",
        description="Start a nats-server (unless --nats-url or CDO_NATS_URL names one), the "
        "simulated cluster, the control plane (domain controller and clique allocator, with "
        "the CRDs and the allocator's webhook registered) and the node host that runs every "
        "node's IMEX agent and health monitor, each in the background with its log under "
        "<state dir>/logs; wait until every service is ready. The whole cluster runs at one "
        "Kubernetes release (--kubernetes-version, with --feature-gates and --runtime-config "
        "as kube-apiserver takes them).",
        **shared,
    )
    parser.add_argument("--topology", type=Path, help="topology file (default: two GB200 racks)")
    parser.add_argument(
        "--racks",
        type=int,
        help="N NVL72 racks (18 nodes of 4 GPUs, one clique each) instead of --topology",
    )
    parser.add_argument(
        "--full-racks",
        type=int,
        help="only the first M racks run a kubelet per node and the nodes' IMEX agent and "
        "health monitor; the other racks' nodes are hollow (docs/simulator.md#hollow-racks)",
    )
    parser.add_argument(
        "--nodes", default="*", help="nodes whose services to host (shell patterns)"
    )
    parser.add_argument("--imex-server-port", type=int, help="IMEX peer port (default 50000)")
    parser.add_argument("--imex-cmd-port", type=int, help="IMEX command port (default 50005)")
    parser.add_argument("--no-wait", action="store_true", help="return once the processes run")
    parser.add_argument(
        "--no-services",
        action="store_true",
        help="leave out the domain controller and the clique allocator",
    )
    parser.add_argument(
        "--nats-auth",
        action="store_true",
        help="NATS identities: the server runs the auth callout, the NATS authenticator runs, "
        "and every service connects with its own ServiceAccount token (each node's services "
        "publish only their own node's subjects); prints a reader's token file for "
        "CDO_NATS_TOKEN_FILE",
    )
    parser.add_argument(
        "--timeout", type=float, default=180.0, help="seconds to wait for each step (180)"
    )
    add_release_arguments(parser)


def _add_fault(
    actions: argparse._SubParsersAction[argparse.ArgumentParser], shared: dict[str, Any]
) -> None:
    parser = actions.add_parser(
        "fault",
        help="inject a GPU, NVLink or fabric fault on a node, or clear them; or break its host",
        description="Inject a fault into a node's simulated NVML; cdo's services see it through "
        "pynvml as on a real node. Or set the node's machine into a state platform teams meet: "
        "the host's own nvidia-imex service running, CDI off in its container runtime, the "
        "IMEX programs missing (--clear leaves these as they are).",
        **shared,
    )
    parser.add_argument("node")
    parser.add_argument("--gpu", type=int, help="GPU index (default 0; fabric: every GPU)")
    kinds = parser.add_argument_group("fault (exactly one)")
    kinds.add_argument("--xid", type=int, help="an XID event, e.g. 79 (fallen off the bus)")
    kinds.add_argument("--gpu-lost", action="store_true", help="the GPU falls off the bus")
    kinds.add_argument("--gpu-back", action="store_true", help="the lost GPU returns")
    kinds.add_argument("--nvlink-down", type=int, metavar="LINK", help="an NVLink goes down")
    kinds.add_argument("--nvlink-up", type=int, metavar="LINK", help="an NVLink comes back")
    kinds.add_argument("--fabric-state", choices=FABRIC_STATES, help="fabric registration state")
    kinds.add_argument(
        "--fabric-problem",
        choices=FABRIC_PROBLEMS,
        action="append",
        default=[],
        help="a fabric health problem (repeatable)",
    )
    kinds.add_argument("--clear", action="store_true", help="every GPU of the node healthy")
    kinds.add_argument(
        "--host-imex-service",
        choices=("on", "off"),
        help="the host's own nvidia-imex service runs on the node's IMEX ports (on), or stops",
    )
    kinds.add_argument(
        "--cdi", choices=("on", "off"), help="CDI in the node's containerd configuration"
    )
    kinds.add_argument(
        "--imex-programs",
        choices=("installed", "missing"),
        help="nvidia-imex and nvidia-imex-ctl on the node",
    )


def _add_by_hand(
    actions: argparse._SubParsersAction[argparse.ArgumentParser], shared: dict[str, Any]
) -> None:
    """``nats``, ``restart``, ``freeze``, ``thaw`` and ``clock``: the faults an operator (or a
    test) causes by hand (sim/control/restart.py, freeze.py, nodes.py)."""
    nats = actions.add_parser(
        "nats",
        help="stop or start the nats-server cdo sim up started",
        description="Stop the nats-server (cdo's services keep working; the event feed waits), "
        "or start it again on the same port with the same JetStream store.",
        **shared,
    )
    nats.add_argument("state", choices=["stop", "start"])
    again = actions.add_parser(
        "restart",
        help="restart the control plane, the node host or the API server",
        description="control-plane, node-host: stop the program (SIGTERM) and start it again "
        "as it ran, then wait until it is ready; api: kill the API server (SIGKILL) and start "
        "it again on the same port from its data directory (objects and resourceVersions as "
        "they were, watch history gone).",
        **shared,
    )
    again.add_argument("component", choices=RESTARTABLE)
    for action, verb, what in (
        ("freeze", "stop", "SIGSTOP: it answers nothing and renews no Lease until thawed"),
        ("thaw", "wake", "SIGCONT: a leader whose Lease ran out meanwhile exits and restarts"),
    ):
        parser = actions.add_parser(
            action,
            help=f"{verb} a leader-elected service ({what.split(':')[0]})",
            description=f"{what}.",
            **shared,
        )
        parser.add_argument("service", choices=sorted(FREEZABLE))
    skew = actions.add_parser(
        "clock",
        help="set a node's clock ahead or behind",
        description="Set how far a node's wall clock runs ahead of true time (negative: "
        "behind); its services read the time from it at once. 0 puts it right again.",
        **shared,
    )
    skew.add_argument("node")
    skew.add_argument("offset_s", type=float, metavar="SECONDS")


def run(args: argparse.Namespace, *, state_dir: Path, say: Callable[[str], None]) -> None:
    """Run the parsed ``sim`` action; CommandError and its kinds say what failed."""
    if args.action == "nats":
        (nats_stop if args.state == "stop" else nats_start)(state_dir, say=say)
    elif args.action == "restart":
        restart(state_dir, args.component, say=say)
    elif args.action in ("freeze", "thaw"):
        (freeze if args.action == "freeze" else thaw)(state_dir, args.service, say=say)
    elif args.action == "clock":
        clock(state_dir, args.node, args.offset_s, say=say)
    elif args.action == "up":
        up(
            UpOptions(
                state_dir=state_dir,
                topology=args.topology,
                nats_url=getattr(args, "nats_url", None) or None,
                nodes=args.nodes,
                imex_server_port=args.imex_server_port,
                imex_cmd_port=args.imex_cmd_port,
                wait=not args.no_wait,
                timeout_s=args.timeout,
                services=not args.no_services,
                nats_auth=args.nats_auth,
                kubernetes_version=args.kubernetes_version,
                feature_gates=args.feature_gates,
                runtime_config=args.runtime_config,
                racks=args.racks,
                full_racks=args.full_racks,
            ),
            say=say,
        )
    elif args.action == "down":
        down(state_dir, say=say)
    elif args.action == "power":
        power(state_dir, args.node, args.state, say=say)
    else:
        body = fault_body(
            xid=args.xid,
            gpu=args.gpu,
            gpu_lost=args.gpu_lost,
            gpu_back=args.gpu_back,
            nvlink_down=args.nvlink_down,
            nvlink_up=args.nvlink_up,
            fabric_state=args.fabric_state,
            fabric_problems=args.fabric_problem,
            clear=args.clear,
            host_imex_service=args.host_imex_service,
            cdi=args.cdi,
            imex_programs=args.imex_programs,
        )
        fault(state_dir, args.node, body, say=say)
