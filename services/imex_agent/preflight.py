"""Before the agent starts a daemon: its own leftover, and somebody else's daemon.

**Its own leftover.** The agent records the daemon's pid and the process start time (from
``/proc/<pid>/stat``) in a pid file. A daemon that outlived its agent (the agent was killed;
in a container the runtime would have killed the daemon with it) is found through that file,
checked to be the same process by its start time, and stopped, so that the new agent starts
a daemon of its own with its current configuration.

**Somebody else's daemon.** Before each start the agent tries to connect to the node's IMEX
peer port and command port on its own address. If either answers, another ``nvidia-imex``
already runs on the host (a systemd unit installed with the driver, say), or at least holds
its ports. The agent then does not start one, does not touch the other, and reports it:
condition ``cdo.dev/ImexReady=False`` with reason ``ForeignImexDaemon``, an error in its log,
and readiness false. It checks again every poll interval and starts its own once the ports are
free. A port probe is exact where a process scan is not: it sees exactly the daemons that
would collide with ours, even with many simulated nodes on one host.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path

import msgspec

from services.imex_agent.binaries import is_running
from services.imex_agent.files import atomic_write, remove

log = logging.getLogger("cdo.imex_agent.preflight")


class PidRecord(msgspec.Struct, frozen=True, kw_only=True):
    pid: int
    start_time: int | None = None


def process_start_time(pid: int, *, proc: Path = Path("/proc")) -> int | None:
    """Field 22 of ``/proc/<pid>/stat`` (clock ticks since boot), or None when unreadable."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may contain spaces.
    fields = stat.rpartition(")")[2].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def write_pid_file(path: Path, pid: int) -> None:
    record = PidRecord(pid=pid, start_time=process_start_time(pid))
    atomic_write(path, msgspec.json.encode(record))


def read_pid_file(path: Path) -> PidRecord | None:
    try:
        return msgspec.json.decode(path.read_bytes(), type=PidRecord)
    except FileNotFoundError:
        return None
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        log.warning("unreadable pid file; ignoring it", extra={"path": str(path)})
        return None


def stop_leftover(path: Path, *, timeout_s: float) -> int | None:
    """Stop the daemon a previous agent left behind; its pid, or None. Blocking."""
    record = read_pid_file(path)
    if record is None:
        return None
    pid = record.pid
    alive = is_running(pid)
    same = record.start_time is not None and process_start_time(pid) == record.start_time
    if not alive or not same:
        remove(path)
        return None
    log.warning("stopping the IMEX daemon a previous agent left running", extra={"pid": pid})
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and _alive_same(pid, record.start_time):
        time.sleep(0.05)
    if _alive_same(pid, record.start_time):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and _alive_same(pid, record.start_time):
            time.sleep(0.05)
    remove(path)
    return pid


def _alive_same(pid: int, start_time: int | None) -> bool:
    # A zombie keeps its /proc entry until reaped; its state letter is Z.
    if not is_running(pid):
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z" and process_start_time(pid) == start_time


async def answering_ports(
    address: str, ports: Sequence[int], *, timeout_s: float = 0.5
) -> list[int]:
    """The ``ports`` on ``address`` that accept a TCP connection now."""

    async def probe(port: int) -> bool:
        try:
            async with asyncio.timeout(timeout_s):
                _reader, writer = await asyncio.open_connection(address, port)
        except (OSError, TimeoutError):
            return False
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return True

    results = await asyncio.gather(*(probe(port) for port in ports))
    return [port for port, answered in zip(ports, results, strict=True) if answered]
