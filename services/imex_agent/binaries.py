"""The IMEX programs as the agent drives them: one daemon process and the control tool.

:class:`Imex` is the handle an agent gets for its node. Two are used in production:

- :class:`CommandImex` starts ``nvidia-imex`` itself, in a session of its own (so neither the
  agent's death nor a signal to the agent's process group reaches it) and asks
  ``nvidia-imex-ctl``; outside a container the daemon outlives the agent;
- :class:`LauncherImex` asks the IMEX launcher (:mod:`services.imex_agent.launcher`, the
  daemon's own container in the agent's pod) to start it, so that it outlives the agent's
  container too; everything else is as with :class:`CommandImex`.

Either way the daemon is an :class:`ImexProcess` held through a pidfd (Linux 5.4 or later): the
agent waits for it, signals it and stops it by that handle, whether it started it, the launcher
did, or an earlier agent did and this one adopted it (``Imex.adopt``, checked as
:mod:`preflight` describes). A pidfd names one process for good, so a signal can never reach a
process that got the pid later.

The simulator points both commands at ``python -m sim.imex.daemon`` / ``python -m sim.imex.ctl``,
or passes an in-process implementation of the same Protocol to host many nodes in one process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import msgspec

from services.imex_agent.preflight import (
    DaemonRecord,
    ProcessIdentity,
    identify,
    is_running,
    process_start_time,
    read_process,
)
from services.imex_agent.report import (
    UNAVAILABLE,
    DomainReport,
    ReportError,
    parse_domain_report,
    parse_state,
)
from shared.errors import CdoError

__all__ = [
    "CommandImex",
    "Imex",
    "ImexProcess",
    "ImexStartError",
    "LaunchReply",
    "LaunchRequest",
    "LauncherImex",
    "NotAdoptableError",
    "PidProcess",
    "is_running",
    "spawn",
]

log = logging.getLogger("cdo.imex_agent.binaries")


class ImexStartError(CdoError):
    """The daemon program could not be started at all (missing, not executable)."""


class NotAdoptableError(CdoError):
    """The daemon a record names is not there to adopt; the message says why."""


class ImexProcess(Protocol):
    """One running daemon."""

    @property
    def pid(self) -> int | None: ...

    @property
    def identity(self) -> ProcessIdentity:
        """What a later agent needs to find this very daemon again (the daemon record)."""
        ...

    async def wait(self) -> int | None:
        """Wait until the daemon exits; its exit code (negative: killed by that signal; None:
        unknown, because this agent is not its parent)."""
        ...

    def reload(self) -> None:
        """SIGUSR1: reload credentials, re-resolve node names, restart outgoing connections."""
        ...

    async def stop(self, *, timeout_s: float) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout_s``; the exit code as :meth:`wait` says it."""
        ...

    def release(self) -> None:
        """Stop watching the daemon and leave it running (for the next agent to adopt)."""
        ...


class Imex(Protocol):
    """Starting the node's daemon, finding a running one again, asking the control tool."""

    async def start(self, config: Path, *, output: Path) -> ImexProcess:
        """Start a daemon with ``config``; its console output goes to ``output``."""
        ...

    def adopt(self, record: DaemonRecord, *, config: Path) -> ImexProcess:
        """The running daemon ``record`` names, a daemon of ``config``; NotAdoptableError when
        there is no such daemon (the message says why)."""
        ...

    async def query_state(self, config: Path) -> str:
        """What ``nvidia-imex-ctl -c config -q`` prints (UNAVAILABLE when unreachable)."""
        ...

    async def query_domain(self, config: Path) -> DomainReport:
        """``nvidia-imex-ctl -c config -N -j``, read; ReportError when it cannot be."""
        ...


# -- processes --------------------------------------------------------------------------------


class PidProcess:
    """A daemon process held through a pidfd: a child of this process or not.

    The pidfd becomes readable when the process exits; a child is then reaped here (its exit
    code is known), any other process by its own parent (the exit code is not known here).
    """

    def __init__(self, pid: int, fd: int, *, start_time: int | None) -> None:
        self._pid = pid
        self._fd: int | None = fd
        self._start_time = start_time
        self._exit: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._code: int | None = None
        self._exited = False

    @classmethod
    def open(cls, pid: int, *, start_time: int | None = None) -> PidProcess:
        """Hold process ``pid`` (started at ``start_time``, when given); ProcessLookupError when
        there is no such process."""
        fd = os.pidfd_open(pid)
        # Checked after the pidfd is open: from now on the pid cannot pass to another process.
        current = process_start_time(pid)
        if start_time is not None and current != start_time:
            os.close(fd)
            raise ProcessLookupError(f"process {pid} is not the one started at tick {start_time}")
        return cls(pid, fd, start_time=current)

    @property
    def pid(self) -> int | None:
        return self._pid

    @property
    def identity(self) -> ProcessIdentity:
        return ProcessIdentity(pid=self._pid, start_time=self._start_time)

    @property
    def exited(self) -> bool:
        return self._exited

    def _exit_future(self) -> asyncio.Future[None]:
        if self._exit is None:
            assert self._fd is not None, "released"
            loop = asyncio.get_running_loop()
            self._loop = loop
            self._exit = loop.create_future()
            loop.add_reader(self._fd, self._on_exit)
        return self._exit

    def _on_exit(self) -> None:
        fd = self._fd
        assert fd is not None and self._loop is not None
        self._loop.remove_reader(fd)
        self._code = _reap(fd)
        self._exited = True
        self._close()
        if self._exit is not None and not self._exit.done():
            self._exit.set_result(None)

    async def wait(self) -> int | None:
        if not self._exited:
            # Shared by every waiter; cancelling one of them leaves the others waiting.
            await asyncio.shield(self._exit_future())
        return self._code

    def _signal(self, signum: int) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(self._fd, signum)

    def reload(self) -> None:
        self._signal(signal.SIGUSR1)

    async def stop(self, *, timeout_s: float) -> int | None:
        if self._exited:
            return self._code
        self._signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(timeout_s):
                return await self.wait()
        except TimeoutError:
            log.warning(
                "nvidia-imex did not stop after SIGTERM; killing it",
                extra={"pid": self._pid, "timeout_s": timeout_s},
            )
        self._signal(signal.SIGKILL)
        return await self.wait()

    def release(self) -> None:
        if self._exit is not None and self._fd is not None and self._loop is not None:
            self._loop.remove_reader(self._fd)
            if not self._exit.done():
                self._exit.cancel()
        self._close()

    def _close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def _reap(fd: int) -> int | None:
    """The exit code of the exited process behind ``fd`` if it is a child of ours (reaped now)."""
    try:
        result = os.waitid(os.P_PIDFD, fd, os.WEXITED | os.WNOHANG)
    except ChildProcessError:
        return None  # not our child: its parent reaps it
    if result is None:
        return None
    return result.si_status if result.si_code == os.CLD_EXITED else -result.si_status


def spawn(argv: Sequence[str], *, output: Path) -> PidProcess:
    """Start ``argv`` in a session of its own, with its output appended to ``output`` (blocking).

    A child of this process that outlives it: it is no child of the caller's process group and
    holds no descriptor of it but its standard streams; after the caller's death it is
    reparented (to init, or to the container's first process).
    """
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.open("ab") as sink:
        try:
            pid = os.posix_spawnp(
                argv[0],
                list(argv),
                dict(os.environ),
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_DUP2, sink.fileno(), 1),
                    (os.POSIX_SPAWN_DUP2, sink.fileno(), 2),
                ],
                setsid=True,
                # Python ignores SIGPIPE and SIGXFSZ; the daemon gets the default, as from a
                # shell, and no blocked signal.
                setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
                setsigmask=(),
            )
        except OSError as exc:
            raise ImexStartError(f"cannot run {' '.join(argv)}: {exc}") from exc
    return PidProcess.open(pid)


def adopt_process(record: DaemonRecord, *, config: Path) -> PidProcess:
    """The daemon process ``record`` names (checked against /proc); NotAdoptableError if none."""
    process = record.process
    facts = read_process(process.pid) if process.pid is not None else None
    reason = identify(process, facts, config=config)
    if reason is not None:
        raise NotAdoptableError(reason)
    assert process.pid is not None
    try:
        return PidProcess.open(process.pid, start_time=process.start_time)
    except ProcessLookupError:
        raise NotAdoptableError(f"process {process.pid} exited just now") from None


# -- the programs -----------------------------------------------------------------------------


class CommandImex:
    """The real programs (or stand-ins with the same command line); the daemon started here."""

    def __init__(
        self,
        *,
        daemon_argv: Sequence[str],
        ctl_argv: Sequence[str],
        ctl_timeout_s: float = 10.0,
    ) -> None:
        if not daemon_argv or not ctl_argv:
            raise ValueError("the daemon and ctl commands must not be empty")
        self._daemon = tuple(daemon_argv)
        self._ctl = tuple(ctl_argv)
        self._timeout = ctl_timeout_s

    async def start(self, config: Path, *, output: Path) -> ImexProcess:
        return await asyncio.to_thread(spawn, [*self._daemon, "-c", str(config)], output=output)

    def adopt(self, record: DaemonRecord, *, config: Path) -> ImexProcess:
        return adopt_process(record, config=config)

    async def _ctl_output(self, config: Path, *args: str) -> tuple[int, bytes, bytes]:
        try:
            process = await asyncio.create_subprocess_exec(
                *self._ctl,
                "-c",
                str(config),
                *args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except OSError as exc:
            raise ReportError(f"cannot run {' '.join(self._ctl)}: {exc}") from exc
        try:
            async with asyncio.timeout(self._timeout):
                stdout, stderr = await process.communicate()
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
            raise ReportError(
                f"nvidia-imex-ctl {' '.join(args)} gave no answer within {self._timeout:g} s"
            ) from None
        except asyncio.CancelledError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            with contextlib.suppress(Exception):
                await asyncio.shield(process.wait())
            raise
        return process.returncode or 0, stdout, stderr

    async def query_state(self, config: Path) -> str:
        try:
            _code, stdout, _stderr = await self._ctl_output(config, "-q")
        except ReportError as exc:
            log.debug("nvidia-imex-ctl -q failed", extra={"error": str(exc)})
            return UNAVAILABLE
        return parse_state(stdout.decode(errors="replace"))

    async def query_domain(self, config: Path) -> DomainReport:
        code, stdout, stderr = await self._ctl_output(config, "-N", "-j")
        if code != 0:
            message = stderr.decode(errors="replace").strip() or f"exit code {code}"
            raise ReportError(f"nvidia-imex-ctl -N -j: {message}")
        return parse_domain_report(stdout)


class LaunchRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One line to the launcher: start the daemon with this config, output to this file."""

    config: str
    output: str


class LaunchReply(msgspec.Struct, frozen=True, kw_only=True):
    """The launcher's answer: the daemon's pid and start time, or why it could not start it."""

    pid: int = 0
    start_time: int | None = None
    error: str = ""


class LauncherImex(CommandImex):
    """The daemon started by the IMEX launcher in a container of its own (shared pid namespace).

    The agent asks the launcher over its unix socket and then holds the daemon by pid like any
    other (:class:`PidProcess`); the launcher is its parent and reaps it.
    """

    def __init__(
        self,
        *,
        socket: Path,
        ctl_argv: Sequence[str],
        ctl_timeout_s: float = 10.0,
        launch_timeout_s: float = 30.0,
    ) -> None:
        super().__init__(
            daemon_argv=("nvidia-imex",), ctl_argv=ctl_argv, ctl_timeout_s=ctl_timeout_s
        )
        self._socket = socket
        self._launch_timeout = launch_timeout_s

    async def start(self, config: Path, *, output: Path) -> ImexProcess:
        reply = await self._ask(LaunchRequest(config=str(config), output=str(output)))
        if reply.error or reply.pid <= 0:
            why = reply.error or f"it answered no pid ({reply})"
            raise ImexStartError(f"the IMEX launcher could not start nvidia-imex: {why}")
        try:
            return PidProcess.open(reply.pid, start_time=reply.start_time)
        except ProcessLookupError as exc:
            raise ImexStartError(
                f"the IMEX launcher started nvidia-imex as pid {reply.pid}, which is not visible "
                f"here ({exc}); is the pod's process namespace shared?"
            ) from exc

    async def _ask(self, request: LaunchRequest) -> LaunchReply:
        try:
            async with asyncio.timeout(self._launch_timeout):
                reader, writer = await asyncio.open_unix_connection(str(self._socket))
                try:
                    writer.write(msgspec.json.encode(request) + b"\n")
                    await writer.drain()
                    line = await reader.readline()
                finally:
                    writer.close()
                    with contextlib.suppress(OSError):
                        await writer.wait_closed()
        except TimeoutError:
            raise ImexStartError(
                f"the IMEX launcher at {self._socket} gave no answer within "
                f"{self._launch_timeout:g} s"
            ) from None
        except OSError as exc:
            raise ImexStartError(
                f"cannot reach the IMEX launcher at {self._socket}: {exc}"
            ) from exc
        try:
            return msgspec.json.decode(line, type=LaunchReply)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise ImexStartError(f"the IMEX launcher answered {line[:200]!r}: {exc}") from exc
