"""Before the agent starts a daemon: the one that already runs (adopt it), and somebody else's.

**The daemon record.** When the agent starts a daemon it writes ``nvidia-imex.pid`` in its
config directory (atomically): which process it is (the pid and the process's start time, field
22 of ``/proc/<pid>/stat``; an in-process daemon of the simulator has an instance id instead) and
what it serves (the clique, the slot, digests of the ``config.cfg`` and ``nodes_config.cfg`` it
was started with). The record goes when the daemon is stopped or is seen to
exit; an agent that dies leaves it behind with the daemon.

**Adoption.** An agent that starts (after a crash, a SIGKILL, an upgrade of its container) reads
the record before it does anything else and asks its ``Imex`` handle for that process
(``Imex.adopt``). A process is the recorded daemon only when (the pure :func:`identify`) a
process with that pid exists, is not a zombie, started at the recorded clock tick (a pid the
kernel has since given to another process has another start time), and runs a daemon of this
node's ``config.cfg`` (``-c <config dir>/config.cfg`` on its command line). Such a daemon is
adopted: the agent watches and signals it as if it had started it, and the controller's usual
rule then applies to what the record says it serves. The same files: it is kept, untouched (no
restart; no SIGUSR1 unless the hosts mapping has to change). Another ``config.cfg`` or node map:
it is restarted, once. A record that names anything else is removed and that process left alone:
it is not ours.

Why a pid file, and not the process group or the command port: the port (``nvidia-imex-ctl
-q``) tells that *a* daemon answers on the node's address, not which process it is or what it
was started with (it is the foreign-daemon probe below); a process group or session id is only a
pid again, with the same reuse problem and nothing about the configuration. The record holds
both the identity (pid and start time, checked against ``/proc``) and the configuration (the
digests), and it lives where the daemon's own files live.

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
import itertools
import logging
import os
from collections.abc import Sequence
from pathlib import Path

import msgspec

from services.imex_agent.files import atomic_write

log = logging.getLogger("cdo.imex_agent.preflight")

PROC = Path("/proc")


class ProcessIdentity(msgspec.Struct, frozen=True, kw_only=True):
    """What tells one daemon process from every other on the node, now and after a restart."""

    pid: int | None = None
    start_time: int | None = None
    """Field 22 of ``/proc/<pid>/stat``: clock ticks from boot to the process's start."""
    instance: str = ""
    """For a daemon without a process of its own (the simulator's): its ``Imex`` handle's id."""


class DaemonRecord(msgspec.Struct, frozen=True, kw_only=True):
    """The daemon record (``nvidia-imex.pid``): which process, and what it was started with."""

    process: ProcessIdentity
    clique: str = ""
    slot: int = -1
    config_digest: str = ""
    """Digest of the ``config.cfg`` the daemon was started with."""
    map_digest: str = ""
    """Digest of its ``nodes_config.cfg``."""


class ProcessFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What ``/proc`` says about one process."""

    pid: int
    state: str
    """The state letter of ``/proc/<pid>/stat`` (``Z``: a zombie, it has exited)."""
    start_time: int | None
    argv: tuple[str, ...]
    parent: int | None = None
    """The parent's pid (field 4)."""


def identify(process: ProcessIdentity, facts: ProcessFacts | None, *, config: Path) -> str | None:
    """None when ``facts`` show the daemon ``process`` names; otherwise why not (pure)."""
    pid = process.pid
    if pid is None:
        return "the record names no process id"
    if facts is None:
        return f"no process {pid} runs"
    if facts.state == "Z":
        return f"process {pid} has exited"
    if process.start_time is None or facts.start_time != process.start_time:
        return (
            f"process {pid} started at tick {facts.start_time}, the recorded daemon at "
            f"{process.start_time}: the pid now belongs to another process"
        )
    argv = facts.argv
    wanted = str(config)
    if not any(a == "-c" and b == wanted for a, b in itertools.pairwise(argv)):
        shown = " ".join(argv)[:200] or "(no command line)"
        return f"process {pid} ({shown}) is not an IMEX daemon of {wanted}"
    return None


def read_process(pid: int, *, proc: Path = PROC) -> ProcessFacts | None:
    """``/proc/<pid>``'s state, start time and command line; None when there is no such process."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
        cmdline = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may contain spaces.
    fields = stat.rpartition(")")[2].split()
    state = fields[0] if fields else "?"
    argv = tuple(part.decode(errors="replace") for part in cmdline.split(b"\0") if part)
    return ProcessFacts(
        pid=pid,
        state=state,
        start_time=_field(fields, 19),
        argv=argv,
        parent=_field(fields, 1),
    )


def _field(fields: list[str], index: int) -> int | None:
    try:
        return int(fields[index])
    except (IndexError, ValueError):
        return None


def process_start_time(pid: int, *, proc: Path = PROC) -> int | None:
    """Field 22 of ``/proc/<pid>/stat`` (clock ticks since boot), or None when unreadable."""
    facts = read_process(pid, proc=proc)
    return facts.start_time if facts is not None else None


def is_running(pid: int) -> bool:
    """Whether a process with ``pid`` exists (zombies included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def write_record(path: Path, record: DaemonRecord) -> None:
    atomic_write(path, msgspec.json.encode(record))


def read_record(path: Path) -> DaemonRecord | None:
    """The daemon record at ``path``; None when there is none or it cannot be read."""
    try:
        return msgspec.json.decode(path.read_bytes(), type=DaemonRecord)
    except FileNotFoundError:
        return None
    except (OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        log.warning(
            "unreadable daemon record; ignoring it", extra={"path": str(path), "error": str(exc)}
        )
        return None


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
