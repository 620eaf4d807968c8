"""``nvidia-imex-ctl``, simulated: ``python -m sim.imex.ctl [-c config.cfg] -q | -N [-j] [-H]``.

Options follow the real tool's usage line::

    nvidia-imex-ctl [-i <IP> <PORT> | -u <unix socket path> | -c <config.cfg path>]
                    <-n | -N | -q | -s> [-j] [-H] [-t <timeout ms>]

-q   print the daemon's state (READY, INITIALIZING, ...) once. Exit 0 when READY, 1 when not
     READY, 1 with UNAVAILABLE when the daemon cannot be reached.
-N   ask every node of the config's nodes_config and print the connectivity table ending in
     ``Domain State: UP|DEGRADED|DOWN`` (exit 0); with -j as JSON, with -H with hostnames.
-n   like -N, repeated; prints again whenever something changes.
-s   print the daemon's state every time it changes, until it goes away or -t expires.

A config file that cannot be read is reported on stderr with exit code 255. Beyond the real
options, ``--hosts-file`` names the hosts file used to resolve node names (default: the
CDO_SIM_IMEX_HOSTS_FILE environment variable, then the system resolver).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from sim.imex.client import DEFAULT_TIMEOUT, Endpoint, local_endpoint, query_domain, query_status
from sim.imex.config import DEFAULT_CONFIG_PATH, load_config
from sim.imex.errors import CommandError, ImexConfigError
from sim.imex.nodemap import Resolver
from sim.imex.report import DomainView, differs, mark_changes, render_json, render_text
from sim.imex.states import DaemonState

__all__ = ["main"]

PROG = "nvidia-imex-ctl"
EXIT_OK = 0
EXIT_NOT_READY = 1
EXIT_USAGE = 2
EXIT_CONFIG = 255
_MONITOR_PERIOD = 0.5
_SUBSCRIBE_PERIOD = 0.1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Query simulated nvidia-imex daemons through their command service."
    )
    target = parser.add_mutually_exclusive_group()
    target.add_argument("-c", dest="config", type=Path, help="nvidia-imex config.cfg path")
    target.add_argument(
        "-i", dest="address", nargs=2, metavar=("IP", "PORT"), help="command service address"
    )
    target.add_argument("-u", dest="unix_path", metavar="PATH", help="command unix socket path")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("-q", dest="action", action="store_const", const="q", help="state once")
    action.add_argument(
        "-N", dest="action", action="store_const", const="N", help="whole domain status"
    )
    action.add_argument(
        "-n", dest="action", action="store_const", const="n", help="monitor the domain"
    )
    action.add_argument(
        "-s", dest="action", action="store_const", const="s", help="follow state changes"
    )
    for unsupported in ("-d", "-m"):
        action.add_argument(
            unsupported, dest="action", action="store_const", const=unsupported[1:], help="(n/a)"
        )
    parser.add_argument("-j", dest="json", action="store_true", help="JSON output for -N/-n")
    parser.add_argument("-H", dest="hostnames", action="store_true", help="show hostnames")
    parser.add_argument("-t", dest="timeout_ms", type=int, help="stop -s/-n after MS ms")
    parser.add_argument("--hosts-file", type=Path, help="hosts file for node names")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return asyncio.run(_main(args))
    except KeyboardInterrupt:
        return EXIT_OK


async def _main(args: argparse.Namespace) -> int:
    if args.action in ("d", "m"):
        return _fail(f"-{args.action} is not supported by the simulated {PROG}", EXIT_USAGE)
    resolver = Resolver.from_environment(args.hosts_file)
    if args.action in ("N", "n"):
        if args.address or args.unix_path:
            return _fail(f"-{args.action} needs the config file (-c), not -i or -u", EXIT_USAGE)
        return await _domain(args, resolver)
    try:
        endpoint = _endpoint(args)
    except ImexConfigError as exc:
        return _fail(str(exc), EXIT_CONFIG)
    if args.action == "q":
        return await _query(endpoint)
    return await _subscribe(endpoint, args.timeout_ms)


def _endpoint(args: argparse.Namespace) -> Endpoint:
    if args.address:
        ip, port = args.address
        try:
            return Endpoint(host=ip, port=int(port))
        except ValueError:
            raise ImexConfigError(f"-i: {port!r} is not a port number") from None
    if args.unix_path:
        return Endpoint(unix_path=args.unix_path)
    return local_endpoint(load_config(args.config or DEFAULT_CONFIG_PATH))


async def _query(endpoint: Endpoint) -> int:
    try:
        status = await query_status(endpoint)
    except CommandError as exc:
        print(DaemonState.UNAVAILABLE.value)
        return _fail(f"cannot reach the IMEX daemon: {exc}", EXIT_NOT_READY)
    print(status.state.value)
    return EXIT_OK if status.state is DaemonState.READY else EXIT_NOT_READY


async def _domain(args: argparse.Namespace, resolver: Resolver) -> int:
    try:
        config = load_config(args.config or DEFAULT_CONFIG_PATH)
        view = await query_domain(config, resolver=resolver)
    except ImexConfigError as exc:
        return _fail(str(exc), EXIT_CONFIG)
    _print_view(view, args)
    if args.action == "N":
        return EXIT_OK
    deadline = _deadline(args.timeout_ms)
    previous: DomainView = view
    while deadline is None or time.monotonic() < deadline:
        await asyncio.sleep(_MONITOR_PERIOD)
        try:
            current = await query_domain(config, resolver=resolver)
        except ImexConfigError as exc:
            return _fail(str(exc), EXIT_CONFIG)
        if differs(previous, current):
            _print_view(mark_changes(previous, current), args)
            previous = current
    return EXIT_OK


async def _subscribe(endpoint: Endpoint, timeout_ms: int | None) -> int:
    deadline = _deadline(timeout_ms)
    last: DaemonState | None = None
    while deadline is None or time.monotonic() < deadline:
        try:
            status = await query_status(endpoint, reply_within=DEFAULT_TIMEOUT)
        except CommandError as exc:
            if last is None:
                print(DaemonState.UNAVAILABLE.value)
                return _fail(f"cannot reach the IMEX daemon: {exc}", EXIT_NOT_READY)
            # The daemon went away: the subscription ends, as it does when IMEX terminates.
            return EXIT_OK
        if status.state is not last:
            print(status.state.value, flush=True)
            last = status.state
        await asyncio.sleep(_SUBSCRIBE_PERIOD)
    return EXIT_OK


def _print_view(view: DomainView, args: argparse.Namespace) -> None:
    render = render_json if args.json else render_text
    sys.stdout.write(render(view, hostnames=args.hostnames))
    sys.stdout.flush()


def _deadline(timeout_ms: int | None) -> float | None:
    return None if timeout_ms is None else time.monotonic() + timeout_ms / 1000


def _fail(message: str, code: int) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
