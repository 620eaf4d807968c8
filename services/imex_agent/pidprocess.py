"""The daemon as a process held through a pidfd: started here, by the launcher, or adopted.

:func:`spawn` starts a program in a session of its own (a child of this process that outlives
it); :func:`adopt_process` holds the running daemon a record names, after checking it against
``/proc`` (:mod:`preflight`); :class:`PidProcess` waits for, signals and stops either by its
pidfd, so a signal can never reach a process that got the pid later.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Sequence
from pathlib import Path

from services.imex_agent.binaries import ImexStartError, NotAdoptableError
from services.imex_agent.preflight import (
    DaemonRecord,
    ProcessIdentity,
    identify,
    process_start_time,
    read_process,
)

# The name these lines have always logged under, which operators may filter on.
log = logging.getLogger("cdo.imex_agent.binaries")


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

    def takes_reload(self) -> bool:
        if self._exited:
            return False
        return catches_signal(self._pid, signal.SIGUSR1)

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


def catches_signal(pid: int, signum: int, *, proc: Path = Path("/proc")) -> bool:
    """Whether process ``pid`` catches or ignores ``signum`` now (Linux: the SigCgt and SigIgn
    masks of ``/proc/PID/status``). A process that has gone, or whose status cannot be read,
    catches nothing."""
    try:
        status = (proc / str(pid) / "status").read_text()
    except OSError:
        return False
    return signal_in_masks(status, signum)


def signal_in_masks(status: str, signum: int) -> bool:
    """Whether ``signum`` is in the SigCgt or SigIgn mask of a ``/proc/PID/status`` text (pure)."""
    bit = 1 << (signum - 1)
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key in ("SigCgt", "SigIgn") and int(value.strip() or "0", 16) & bit:
            return True
    return False


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
