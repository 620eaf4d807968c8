"""The IMEX programs run for real: the :class:`~services.imex_agent.binaries.Imex` handles.

:class:`CommandImex` starts the daemon itself (:func:`~services.imex_agent.pidprocess.spawn`)
and asks ``nvidia-imex-ctl``; :class:`LauncherImex` has the IMEX launcher start it instead and
holds it by pid. See :mod:`services.imex_agent.binaries` for why either outlives the agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import msgspec

from services.imex_agent.binaries import ImexProcess, ImexStartError
from services.imex_agent.launchprotocol import LaunchReply, LaunchRequest
from services.imex_agent.pidprocess import PidProcess, adopt_process, spawn
from services.imex_agent.preflight import DaemonRecord
from services.imex_agent.report import (
    UNAVAILABLE,
    DomainReport,
    ReportError,
    parse_domain_report,
    parse_state,
)

# The name these lines have always logged under, which operators may filter on.
log = logging.getLogger("cdo.imex_agent.binaries")


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

    def missing_programs(self) -> tuple[str, ...]:
        """The commands' programs that are neither an executable path nor found on PATH."""
        return tuple(argv[0] for argv in (self._daemon, self._ctl) if shutil.which(argv[0]) is None)

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


class LauncherImex(CommandImex):
    """The daemon started by the IMEX launcher in a container of its own (shared pid namespace).

    The agent asks the launcher over its unix socket and then holds the daemon by pid like any
    other (:class:`PidProcess`); the launcher is its parent and reaps it. ``daemon_argv`` is
    only looked for (:meth:`missing_programs`): the launcher's container gets the same driver
    files as the agent's (the same image and runtime class), so a program missing here is
    missing there.
    """

    def __init__(
        self,
        *,
        socket: Path,
        ctl_argv: Sequence[str],
        daemon_argv: Sequence[str] = ("nvidia-imex",),
        ctl_timeout_s: float = 10.0,
        launch_timeout_s: float = 30.0,
    ) -> None:
        super().__init__(daemon_argv=daemon_argv, ctl_argv=ctl_argv, ctl_timeout_s=ctl_timeout_s)
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
