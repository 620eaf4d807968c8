"""``nvidia-imex``, simulated, as a process: ``python -m sim.imex.daemon -c config.cfg``.

A thin shell around ``ImexDaemon``: it reads the config, daemonizes when DAEMONIZE=1 (the
default, as for the real daemon: the launching process exits 0 once the daemon is up, or 1 if it
could not start), and maps signals the way the real daemon documents them:

- SIGTERM, SIGINT, SIGQUIT: notify peers, shut down, exit 0;
- SIGUSR1: reload TLS credentials and restart outgoing connections, which resolve their
  node-map names again (at most once per 5 s; the rest are ignored). nodes_config is read only
  at start, as by the real daemon;
- SIGHUP: write the in-memory verbose log buffer to the log. It does not reload anything.

Start-up problems (unreadable or invalid config, address in use, bad TLS material) are printed
to stderr as one line and end the process with exit code 1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from sim.imex.config import DEFAULT_CONFIG_PATH, ImexConfig, load_config
from sim.imex.errors import ImexConfigError, ImexStartError
from sim.imex.logbook import DaemonLog
from sim.imex.nodemap import Resolver
from sim.imex.service import DEFAULT_VERSION, ImexDaemon, Timing

__all__ = ["main"]

PROG = "nvidia-imex"
EXIT_OK = 0
EXIT_FAILED = 1

# Called once start-up is decided: (daemon is up, its log goes to stderr).
_Notify = Callable[[bool, bool], None]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Simulated NVIDIA IMEX daemon.")
    parser.add_argument(
        "-c", "--config", type=Path, default=DEFAULT_CONFIG_PATH, help="config.cfg path"
    )
    parser.add_argument("-p", "--port", type=int, help="peer port; overrides SERVER_PORT")
    parser.add_argument("-v", "--version", action="version", version=f"{PROG} {DEFAULT_VERSION}")
    simulator = parser.add_argument_group("simulator options (not in the real daemon)")
    simulator.add_argument("--hosts-file", type=Path, help="hosts file for node names")
    simulator.add_argument("--hostname", help="the hostname this node reports (-H)")
    simulator.add_argument(
        "--sigusr1-interval",
        type=float,
        default=Timing().reconnect_min_interval,
        help="seconds within which a repeated SIGUSR1 is ignored (default: %(default)s)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.port is not None and not 0 <= args.port <= 65535:
        print(f"{PROG}: -p: {args.port} is not a port number (0..65535)", file=sys.stderr)
        return EXIT_FAILED
    try:
        config = load_config(args.config)
    except ImexConfigError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if config.daemonize:
        return _daemonized(lambda notify: _run(config, args, notify))
    return _run(config, args, lambda _ok, _console: None)


def _run(config: ImexConfig, args: argparse.Namespace, notify: _Notify) -> int:
    return asyncio.run(_serve(config, args, notify))


async def _serve(config: ImexConfig, args: argparse.Namespace, notify: _Notify) -> int:
    log = DaemonLog.open(config, name=config.bind_interface_ip or "daemon", fallback="stderr")
    daemon = ImexDaemon(
        config,
        resolver=Resolver.from_environment(args.hosts_file),
        hostname=args.hostname,
        timing=Timing(reconnect_min_interval=args.sigusr1_interval),
        log=log,
        server_port=args.port,
    )
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    # Installed before start-up so that a signal arriving during it is handled, not fatal.
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT):
        loop.add_signal_handler(signum, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, daemon.request_reconnect)
    loop.add_signal_handler(signal.SIGHUP, daemon.dump_verbose_log)
    try:
        await daemon.start()
    except (ImexConfigError, ImexStartError) as exc:
        if not log.on_console:
            print(f"{PROG}: {exc}", file=sys.stderr)
        log.critical(f"cannot start: {exc}")
        notify(False, log.on_console)
        return EXIT_FAILED
    notify(True, log.on_console)
    stopped = asyncio.create_task(stop.wait())
    finished = asyncio.create_task(daemon.wait())
    await asyncio.wait({stopped, finished}, return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    await daemon.stop()
    await asyncio.gather(stopped, finished, return_exceptions=True)
    return EXIT_OK


def _daemonized(run: Callable[[_Notify], int]) -> int:
    """Run ``run`` in a detached child; this process exits when the child reports start-up.

    Mirrors a forking daemon under systemd's Type=forking: the exit code of the launching
    process says whether the daemon came up.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid:
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            verdict = pipe.read(1)
        return EXIT_OK if verdict == b"0" else EXIT_FAILED
    os.close(read_end)
    os.setsid()

    def notify(ok: bool, console_log: bool) -> None:
        os.write(write_end, b"0" if ok else b"1")
        os.close(write_end)
        if ok:
            _detach_stdio(keep_stderr=console_log)

    code = EXIT_FAILED
    try:
        code = run(notify)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _detach_stdio(*, keep_stderr: bool) -> None:
    # stderr stays when it is where the log goes; otherwise the daemon would go silent.
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1) if keep_stderr else (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
