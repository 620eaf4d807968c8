"""The IMEX programs as the agent drives them: one daemon process and the control tool.

:class:`Imex` is the handle an agent gets for its node. :class:`CommandImex`, the one used in
production, runs ``nvidia-imex`` as a child process and asks ``nvidia-imex-ctl``; the simulator
points both commands at ``python -m sim.imex.daemon`` / ``python -m sim.imex.ctl``, or passes an
in-process implementation of the same Protocol to host many nodes in one process.
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

from services.imex_agent.report import (
    UNAVAILABLE,
    DomainReport,
    ReportError,
    parse_domain_report,
    parse_state,
)
from shared.errors import CdoError

log = logging.getLogger("cdo.imex_agent.binaries")


class ImexStartError(CdoError):
    """The daemon program could not be started at all (missing, not executable)."""


class ImexProcess(Protocol):
    """One running daemon."""

    @property
    def pid(self) -> int | None: ...

    async def wait(self) -> int:
        """Wait until the daemon exits; its exit code (negative: killed by that signal)."""
        ...

    def reload(self) -> None:
        """SIGUSR1: reload credentials, re-resolve node names, restart outgoing connections."""
        ...

    async def stop(self, *, timeout_s: float) -> int:
        """SIGTERM, then SIGKILL after ``timeout_s``; the exit code."""
        ...


class Imex(Protocol):
    """Starting the node's daemon and asking the control tool about it."""

    async def start(self, config: Path, *, output: Path) -> ImexProcess:
        """Start a daemon with ``config``; its console output goes to ``output``."""
        ...

    async def query_state(self, config: Path) -> str:
        """What ``nvidia-imex-ctl -c config -q`` prints (UNAVAILABLE when unreachable)."""
        ...

    async def query_domain(self, config: Path) -> DomainReport:
        """``nvidia-imex-ctl -c config -N -j``, read; ReportError when it cannot be."""
        ...


class _ChildProcess:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process

    @property
    def pid(self) -> int | None:
        return self._process.pid

    async def wait(self) -> int:
        return await self._process.wait()

    def reload(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self._process.send_signal(signal.SIGUSR1)

    async def stop(self, *, timeout_s: float) -> int:
        if self._process.returncode is not None:
            return self._process.returncode
        with contextlib.suppress(ProcessLookupError):
            self._process.terminate()
        try:
            async with asyncio.timeout(timeout_s):
                return await self._process.wait()
        except TimeoutError:
            log.warning(
                "nvidia-imex did not stop after SIGTERM; killing it",
                extra={"pid": self._process.pid, "timeout_s": timeout_s},
            )
        with contextlib.suppress(ProcessLookupError):
            self._process.kill()
        return await self._process.wait()


class CommandImex:
    """The real programs (or stand-ins with the same command line), as child processes."""

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
        output.parent.mkdir(parents=True, exist_ok=True)
        with output.open("ab") as sink:
            try:
                process = await asyncio.create_subprocess_exec(
                    *self._daemon,
                    "-c",
                    str(config),
                    stdin=subprocess.DEVNULL,
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                    # Its own session: a signal for the agent's process group (a terminal's
                    # Ctrl-C) does not reach the daemon; the agent stops it in order.
                    start_new_session=True,
                )
            except OSError as exc:
                raise ImexStartError(f"cannot run {' '.join(self._daemon)}: {exc}") from exc
        return _ChildProcess(process)

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


def is_running(pid: int) -> bool:
    """Whether a process with ``pid`` exists (zombies included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
