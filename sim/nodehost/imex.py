"""Each hosted node's IMEX daemon, simulated in this process behind the agent's ``Imex`` handle.

The IMEX agent drives its daemon through :class:`services.imex_agent.Imex`; here that handle
starts a :class:`sim.imex.ImexDaemon` in the event loop instead of an ``nvidia-imex`` process,
and asks it what ``nvidia-imex-ctl`` would. The daemon resolves its node map through the node's
own hosts file, which the agent manages.

``-N`` asks every node of the map: with 18 members polling each other that is hundreds of
command-service round trips a second, all inside this one process. A :class:`DaemonDirectory`
shared by the hosted nodes lets a query reach a daemon of this process by calling it directly:
the answer is the same ``NodeStatus`` the daemon's command service would send, computed at the
moment of the query; daemons elsewhere (another node host, a subprocess) are asked over TCP.

:meth:`NodeImex.power_loss` kills the node's daemons without a goodbye, which is what peers
see when a node loses power (their links go RECOVERING, not DISCONNECTED at once).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from services.imex_agent import ImexProcess
from services.imex_agent.binaries import ImexStartError
from services.imex_agent.report import UNAVAILABLE, DomainReport, parse_domain_report
from sim.imex import (
    CommandError,
    Endpoint,
    ImexConfigError,
    ImexDaemon,
    NodeStatus,
    Resolver,
    Timing,
    load_config,
    local_endpoint,
    query_domain,
    query_status,
    render_json,
)
from sim.imex import ImexStartError as SimStartError
from sim.imex.client import DEFAULT_TIMEOUT


class _RunningDaemon:
    """One in-process daemon as the agent's ``ImexProcess``."""

    def __init__(self, daemon: ImexDaemon, *, forget: Callable[[ImexDaemon], None]) -> None:
        self._daemon = daemon
        self._forget = forget

    @property
    def pid(self) -> int | None:
        return None  # no process of its own: nothing a pid file could name

    async def wait(self) -> int:
        try:
            await self._daemon.wait()
        except Exception:
            return 1
        finally:
            self._forget(self._daemon)
        return 0

    def reload(self) -> None:
        self._daemon.request_reconnect()

    async def stop(self, *, timeout_s: float) -> int:
        try:
            async with asyncio.timeout(timeout_s):
                await self._daemon.stop()
        finally:
            self._forget(self._daemon)
        return 0


class DaemonDirectory:
    """The started daemons of this process, by the TCP address of their command service."""

    def __init__(self) -> None:
        self._daemons: dict[tuple[str, int], ImexDaemon] = {}

    def add(self, daemon: ImexDaemon) -> None:
        address = daemon.command_address
        if address is not None:
            self._daemons[address] = daemon

    def discard(self, daemon: ImexDaemon) -> None:
        for address, known in list(self._daemons.items()):
            if known is daemon:
                del self._daemons[address]

    def serving(self, endpoint: Endpoint) -> ImexDaemon | None:
        """The daemon of this process whose command service listens at ``endpoint``, if any."""
        if endpoint.unix_path:
            return None
        address = (endpoint.host or "", endpoint.port or 0)
        daemon = self._daemons.get(address)
        # A daemon that stopped listening (stopping, or stopped) is asked the normal way.
        return daemon if daemon is not None and daemon.command_address == address else None

    async def ask_status(self, endpoint: Endpoint, reply_within: float) -> NodeStatus:
        """What the command service at ``endpoint`` answers (a ``StatusSource``)."""
        daemon = self.serving(endpoint)
        if daemon is None:
            return await query_status(endpoint, reply_within)
        return daemon.status()


class NodeImex:
    """The IMEX programs of one hosted node (implements the agent's ``Imex`` Protocol)."""

    def __init__(
        self, *, hosts_file: Path, timing: Timing, directory: DaemonDirectory | None = None
    ) -> None:
        self._resolver = Resolver(hosts_file)
        self._timing = timing
        self._daemons: set[ImexDaemon] = set()
        self._directory = directory or DaemonDirectory()

    @property
    def running(self) -> int:
        """Daemons of this node that have not stopped."""
        return len(self._daemons)

    async def start(self, config: Path, *, output: Path) -> ImexProcess:
        try:
            daemon = ImexDaemon(load_config(config), resolver=self._resolver, timing=self._timing)
            await daemon.start()
        except (ImexConfigError, SimStartError) as exc:
            raise ImexStartError(str(exc)) from exc
        # Held until it stops, so that a power loss finds every daemon of the node.
        self._daemons.add(daemon)
        self._directory.add(daemon)
        return _RunningDaemon(daemon, forget=self._forget)

    def _forget(self, daemon: ImexDaemon) -> None:
        self._daemons.discard(daemon)
        self._directory.discard(daemon)

    async def query_state(self, config: Path) -> str:
        try:
            endpoint = local_endpoint(load_config(config))
            status = await self._directory.ask_status(endpoint, DEFAULT_TIMEOUT)
        except (CommandError, ImexConfigError):
            return UNAVAILABLE
        return status.state.value

    async def query_domain(self, config: Path) -> DomainReport:
        view = await query_domain(
            load_config(config), resolver=self._resolver, ask_status=self._directory.ask_status
        )
        return parse_domain_report(render_json(view))

    async def power_loss(self) -> None:
        """Kill every daemon of the node at once, as a power cut would."""
        daemons, self._daemons = self._daemons, set()
        for daemon in daemons:
            self._directory.discard(daemon)
        await asyncio.gather(*(daemon.kill() for daemon in daemons), return_exceptions=True)
