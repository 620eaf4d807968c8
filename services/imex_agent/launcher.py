"""The IMEX launcher: runs the node's ``nvidia-imex`` in a container of its own, for the agent.

    python -m services.imex_agent.launcher      # settings: CDO_IMEX_AGENT_IMEX_* (below)

Why: a process the agent starts inside its own container dies with that container (the runtime
kills what is left in a container whose main process exited), so an agent restart would
restart IMEX. In the DaemonSet the daemon therefore lives in a second container of the agent's
pod (``imex-daemon``), whose main process is this launcher; the pod shares one process
namespace (``shareProcessNamespace: true``) and the config directory (an ``emptyDir``, which
lives as long as the pod). The agent's container can then restart (a crash, OOM, a failed
liveness probe, an image updated in place) while the daemon runs on, and the next agent adopts
it through its record, as :mod:`services.imex_agent.preflight` describes.

The launcher knows one request, on a unix socket (``launcher_socket``) in the shared directory:
one JSON line :class:`LaunchRequest` ``{"config": <config.cfg>, "output": <file>}``, answered by
one line :class:`LaunchReply` ``{"pid": N, "start_time": T}`` or ``{"error": "..."}``; and the
readiness probe's ``{"probe": true}`` (:mod:`services.imex_agent.launchprobe`), answered with the
daemon it holds. It runs
``daemon_command -c <config>`` (only a config in its ``config_dir``; the agent chooses no
program) in a session of its own and reaps it when it exits. Everything else the agent does
itself, by pid, through the shared process namespace: SIGUSR1, SIGTERM, watching it exit.

- **One daemon.** The agent asks only when it holds no daemon, so a daemon of the launcher that
  still runs then is one the agent could not adopt (its record lost): the launcher stops it
  (SIGTERM, SIGKILL after ``stop_timeout_s``) before it starts the new one.
- **SIGTERM or SIGINT** (the pod is deleted: uninstall, a pod replaced by hand or on a node
  shutdown): stop the daemon the same way (peers are told) and exit 0. Nothing else stops IMEX.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Mapping
from pathlib import Path

import msgspec

from services.imex_agent.binaries import ImexStartError
from services.imex_agent.launchprotocol import (
    LaunchReply,
    LaunchRequest,
    ProbeRequest,
    decode_request,
)
from services.imex_agent.pidprocess import PidProcess, spawn
from services.imex_agent.settings import ImexSettings
from shared.errors import ConfigError
from shared.runtime.logs import configure_logging
from shared.settings import load_settings

log = logging.getLogger("cdo.imex_agent.launcher")

ENV_PREFIX = "CDO_IMEX_AGENT_IMEX_"


def request_refusal(request: LaunchRequest, *, config_dir: Path) -> str | None:
    """None when the launcher may start a daemon for ``request``; else why not (pure)."""
    config = Path(request.config)
    output = Path(request.output)
    for what, path in (("config", config), ("output", output)):
        if not path.is_absolute() or ".." in path.parts:
            return f"{what} {path} is not an absolute path without '..'"
        if path.parent != config_dir:
            return f"{what} {path} is not in the launcher's directory {config_dir}"
    return None


def _reply_for(daemon: PidProcess) -> LaunchReply:
    return LaunchReply(pid=daemon.identity.pid or 0, start_time=daemon.identity.start_time)


class Launcher:
    """Serves start requests and keeps at most one daemon; see the module docstring."""

    def __init__(self, settings: ImexSettings) -> None:
        if not settings.launcher_socket:
            raise ValueError("the launcher needs launcher_socket")
        self._settings = settings
        self._socket = Path(settings.launcher_socket)
        self._daemon: PidProcess | None = None
        self._reapers: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()

    @property
    def daemon(self) -> PidProcess | None:
        return self._daemon

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set; then stop the daemon."""
        self._socket.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self._socket.unlink()
        server = await asyncio.start_unix_server(self._serve, path=str(self._socket))
        os.chmod(self._socket, 0o600)
        log.info("IMEX launcher serving", extra={"socket": str(self._socket)})
        try:
            async with server:
                await stop.wait()
        finally:
            with contextlib.suppress(FileNotFoundError):
                self._socket.unlink()
            async with self._lock:
                await self._stop_daemon("the launcher is stopping")
            for task in list(self._reapers):
                task.cancel()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readline()
            try:
                request = decode_request(line)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                reply = LaunchReply(error=f"not a launch request: {exc}")
            else:
                if isinstance(request, ProbeRequest):
                    reply = self.held()
                else:
                    reply = await self.launch(request)
            writer.write(msgspec.json.encode(reply) + b"\n")
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    def held(self) -> LaunchReply:
        """The probe's answer: the daemon this launcher holds, pid 0 when none."""
        daemon = self._daemon
        if daemon is None or daemon.exited:
            return LaunchReply()
        return _reply_for(daemon)

    async def launch(self, request: LaunchRequest) -> LaunchReply:
        """Start a daemon for ``request`` (stopping one that still runs first)."""
        refusal = request_refusal(request, config_dir=self._settings.directory)
        if refusal is not None:
            log.warning("refused a launch request", extra={"reason": refusal})
            return LaunchReply(error=refusal)
        async with self._lock:
            await self._stop_daemon("a new daemon was asked for; the agent does not hold this one")
            argv = [*self._settings.daemon_argv, "-c", request.config]
            try:
                daemon = await asyncio.to_thread(spawn, argv, output=Path(request.output))
            except ImexStartError as exc:
                log.error("cannot start nvidia-imex", extra={"error": str(exc)})
                return LaunchReply(error=str(exc))
            self._daemon = daemon
            reaper = asyncio.create_task(self._reap(daemon), name=f"reap {daemon.pid}")
            self._reapers.add(reaper)
            reaper.add_done_callback(self._reapers.discard)
            log.info("nvidia-imex started", extra={"pid": daemon.pid, "config": request.config})
            return _reply_for(daemon)

    async def _reap(self, daemon: PidProcess) -> None:
        code = await daemon.wait()
        log.info("nvidia-imex exited", extra={"pid": daemon.pid, "exit_code": code})
        if self._daemon is daemon:
            self._daemon = None

    async def _stop_daemon(self, why: str) -> None:
        daemon = self._daemon
        if daemon is None or daemon.exited:
            return
        log.warning("stopping nvidia-imex", extra={"pid": daemon.pid, "reason": why})
        code = await daemon.stop(timeout_s=self._settings.stop_timeout_s)
        log.info("nvidia-imex stopped", extra={"pid": daemon.pid, "exit_code": code})
        self._daemon = None


def load(environ: Mapping[str, str] | None = None) -> ImexSettings:
    """The launcher reads the agent's IMEX settings (CDO_IMEX_AGENT_IMEX_*)."""
    return load_settings(ImexSettings, prefix=ENV_PREFIX, environ=environ)


async def _main(settings: ImexSettings) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await Launcher(settings).run(stop)


def main(environ: Mapping[str, str] | None = None) -> int:
    env = os.environ if environ is None else environ
    configure_logging(service="imex-launcher", level=env.get("CDO_LOG_LEVEL", "info"))
    try:
        settings = load(env)
    except ConfigError as exc:
        log.error("bad settings", extra={"error": str(exc)})
        return 2
    if not settings.launcher_socket:
        log.error("set CDO_IMEX_AGENT_IMEX_LAUNCHER_SOCKET: where the agent asks for its daemon")
        return 2
    asyncio.run(_main(settings))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
