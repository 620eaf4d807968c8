"""The ``cdo`` command line: status, events, and the simulated cluster.

    cdo status [--json]
    cdo events [--follow] [--subject PATTERN] [--since TIME | --from-seq N] [--json]
    cdo sim up [--topology FILE] [--nodes GLOB] [--no-wait] [--no-services]
    cdo sim down
    cdo sim power on|off NODE
    cdo sim fault NODE --xid N [--gpu I] | --gpu-lost | --nvlink-down LINK | ... | --clear

Every command takes ``--state-dir``, ``--kubeconfig`` and ``--nats-url`` (before or after the
command name). Exit codes: 0 ok, 1 the command failed, 2 usage, 3 the cluster or NATS cannot be
reached. docs/cli.md has the details.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from shared.cli import events as events_command
from shared.cli import simctl
from shared.cli import status as status_command
from shared.cli.connection import connect_nats, nats_settings, quiet_logging, resolve
from shared.cli.errors import EXIT_OK, CliError
from shared.cli.state import state_dir as resolve_state_dir

FABRIC_STATES = ("not_supported", "not_started", "in_progress", "completed")
FABRIC_PROBLEMS = (
    "degraded_bandwidth",
    "route_recovery",
    "route_unhealthy",
    "access_timeout_recovery",
)
EXIT_CODES = "exit codes: 0 ok, 1 failed, 2 usage, 3 cluster or NATS unreachable"


def _common() -> argparse.ArgumentParser:
    """Connection options, accepted before and after the command (SUPPRESS keeps the first)."""
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("connection")
    group.add_argument(
        "--state-dir",
        type=Path,
        default=argparse.SUPPRESS,
        help="the simulated cluster's state directory (default: $CDO_SIM_STATE_DIR or .cdo/sim)",
    )
    group.add_argument(
        "--kubeconfig",
        default=argparse.SUPPRESS,
        help="kubeconfig of the cluster (default: $KUBECONFIG, else the simulated cluster's)",
    )
    group.add_argument(
        "--nats-url",
        default=argparse.SUPPRESS,
        help="NATS server (default: $CDO_NATS_URL, else the one cdo sim up started, else "
        "nats://127.0.0.1:4222)",
    )
    group.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log to stderr"
    )
    return common


def build_parser() -> argparse.ArgumentParser:
    common = _common()
    parser = argparse.ArgumentParser(
        prog="cdo",
        description="Look at cdo's ComputeDomains and events; run the simulated cluster.",
        parents=[common],
        epilog=EXIT_CODES,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    status = commands.add_parser(
        "status",
        parents=[common],
        help="domains, cliques and nodes",
        description="Domains with phase, clique, channel and members (Kubernetes API); cliques "
        "with capacity (snapshots on NATS); nodes by clique with readiness and faults.",
        epilog=EXIT_CODES,
    )
    status.add_argument("--json", action="store_true", help="one JSON document instead of tables")

    events = commands.add_parser(
        "events",
        parents=[common],
        help="cdo's events from the stream",
        description="Print cdo's CloudEvents from the JetStream stream, oldest first: all "
        "retained history, or from a time or a stream sequence; --follow keeps printing.",
        epilog=EXIT_CODES,
    )
    events.add_argument(
        "-f", "--follow", action="store_true", help="keep printing new events until Ctrl-C"
    )
    events.add_argument(
        "--subject",
        help="NATS subject pattern, e.g. 'cdo.v1.node.*.fault' or short 'node.*.fault'",
    )
    start = events.add_mutually_exclusive_group()
    start.add_argument("--since", help="from a time: 10m, 2h, 1d, or 2025-01-31T12:00:00Z")
    start.add_argument("--from-seq", type=int, help="from this stream sequence number")
    events.add_argument("--json", action="store_true", help="one JSON object per event")

    sim = commands.add_parser(
        "sim",
        parents=[common],
        help="the simulated cluster",
        description="Run the simulated cluster in the background and act on its nodes.",
        epilog=EXIT_CODES,
    )
    actions = sim.add_subparsers(dest="action", required=True, metavar="ACTION")
    up = actions.add_parser(
        "up",
        parents=[common],
        help="start NATS, the simulated cluster and cdo's services in the background",
        description="Start a nats-server (unless --nats-url or CDO_NATS_URL names one), the "
        "simulated cluster, the control plane (domain controller and clique allocator, with "
        "the CRDs and the allocator's webhook registered) and the node host that runs every "
        "node's IMEX agent and health monitor, each in the background with its log under "
        "<state dir>/logs; wait until every service is ready.",
        epilog=EXIT_CODES,
    )
    up.add_argument("--topology", type=Path, help="topology file (default: two GB200 racks)")
    up.add_argument("--nodes", default="*", help="nodes whose services to host (shell patterns)")
    up.add_argument("--imex-server-port", type=int, help="IMEX peer port (default 50000)")
    up.add_argument("--imex-cmd-port", type=int, help="IMEX command port (default 50005)")
    up.add_argument("--no-wait", action="store_true", help="return once the processes run")
    up.add_argument(
        "--no-services",
        action="store_true",
        help="leave out the domain controller and the clique allocator",
    )
    up.add_argument(
        "--timeout", type=float, default=180.0, help="seconds to wait for each step (180)"
    )
    actions.add_parser(
        "down",
        parents=[common],
        help="stop what cdo sim up started",
        description="Stop the node host, the cluster and the nats-server cdo sim up started.",
        epilog=EXIT_CODES,
    )
    power = actions.add_parser(
        "power",
        parents=[common],
        help="switch a node off or on",
        description="Switch a simulated node's power; its kubelet and its hosted services "
        "stop (off) or boot again with healthy GPUs (on).",
        epilog=EXIT_CODES,
    )
    power.add_argument("state", choices=["on", "off"])
    power.add_argument("node")
    fault = actions.add_parser(
        "fault",
        parents=[common],
        help="inject a GPU, NVLink or fabric fault on a node, or clear them",
        description="Inject a fault into a node's simulated NVML; cdo's services see it through "
        "pynvml as on a real node.",
        epilog=EXIT_CODES,
    )
    fault.add_argument("node")
    fault.add_argument("--gpu", type=int, help="GPU index (default 0; fabric: every GPU)")
    kinds = fault.add_argument_group("fault (exactly one)")
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
    return parser


def _say(line: str) -> None:
    print(line, flush=True)


async def _events(args: argparse.Namespace) -> None:
    endpoints = resolve(
        state_dir=resolve_state_dir(getattr(args, "state_dir", None)),
        kubeconfig=getattr(args, "kubeconfig", None),
        nats_url=getattr(args, "nats_url", None),
    )
    query = events_command.Query(
        subject=events_command.subject_pattern(args.subject),
        start=events_command.start_at(
            since=args.since, from_seq=args.from_seq, now=lambda: datetime.now(UTC)
        ),
        follow=args.follow,
        as_json=args.json,
    )
    bus = await connect_nats(endpoints, reconnect_forever=args.follow)
    try:
        stream = nats_settings(endpoints.nats_url).stream
        await events_command.print_events(bus, query, stream=stream, out=sys.stdout)
    finally:
        await bus.close()


def run(args: argparse.Namespace) -> None:
    state_dir = resolve_state_dir(getattr(args, "state_dir", None))
    if args.command == "status":
        endpoints = resolve(
            state_dir=state_dir,
            kubeconfig=getattr(args, "kubeconfig", None),
            nats_url=getattr(args, "nats_url", None),
        )
        asyncio.run(status_command.status(endpoints, as_json=args.json, out=sys.stdout))
    elif args.command == "events":
        asyncio.run(_events(args))
    elif args.action == "up":
        simctl.up(
            simctl.UpOptions(
                state_dir=state_dir,
                topology=args.topology,
                nats_url=getattr(args, "nats_url", None) or None,
                nodes=args.nodes,
                imex_server_port=args.imex_server_port,
                imex_cmd_port=args.imex_cmd_port,
                wait=not args.no_wait,
                timeout_s=args.timeout,
                services=not args.no_services,
            ),
            say=_say,
        )
    elif args.action == "down":
        simctl.down(state_dir, say=_say)
    elif args.action == "power":
        simctl.power(state_dir, args.node, args.state, say=_say)
    else:
        body = simctl.fault_body(
            xid=args.xid,
            gpu=args.gpu,
            gpu_lost=args.gpu_lost,
            gpu_back=args.gpu_back,
            nvlink_down=args.nvlink_down,
            nvlink_up=args.nvlink_up,
            fabric_state=args.fabric_state,
            fabric_problems=args.fabric_problem,
            clear=args.clear,
        )
        simctl.fault(state_dir, args.node, body, say=_say)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    quiet_logging(getattr(args, "verbose", False))
    try:
        run(args)
    except CliError as exc:
        print(f"cdo: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (cdo events | head): not an error of ours.
        sys.stderr.close()
        return EXIT_OK
    return EXIT_OK
