"""Each hosted node's IMEX daemon, simulated in this process behind the agent's ``Imex`` handle.

The IMEX agent drives its daemon through :class:`services.imex_agent.Imex`; here that handle
starts a :class:`sim.imex.ImexDaemon` in the event loop instead of an ``nvidia-imex`` process,
and asks it what ``nvidia-imex-ctl`` would. The daemon and the ctl queries resolve the node
map's names through the node's own hosts file, which the agent manages, and through nothing
else: the machine's DNS knows no simulated node, so a name the file does not list is a peer that
is down, as is a slot the agent points at its sentinel address. The file is read again for
every lookup, so a reconnect attempt sees the agent's last edit without a signal.

``-N`` asks every node of the map: with 18 members polling each other that is hundreds of
command-service round trips a second, all inside this one process. A :class:`DaemonDirectory`
shared by the hosted nodes lets a query reach a daemon of this process by calling it directly:
the answer is the same ``NodeStatus`` the daemon's command service would send, computed at the
moment of the query; daemons elsewhere (another node host, a subprocess) are asked over TCP.

:meth:`NodeImex.power_loss` kills the node's daemons without a goodbye, which is what peers
see when a node loses power (their links go RECOVERING, not DISCONNECTED at once).

**A daemon outlives its agent here too.** The node's :class:`NodeImex` lives as long as the
hosted node, across its agents: an agent whose session ends (its services failed, or a test
killed them) leaves its daemon running, as a real agent leaves ``nvidia-imex`` running, and the
next agent of the node adopts it (:meth:`NodeImex.adopt`). An in-process daemon has no pid, so
its daemon record names it by the daemon's instance id (the id its peers know it by: an adopted
daemon keeps it, a restarted one gets a new one). The daemons end with a power loss
(:meth:`NodeImex.power_loss`), a stop by an agent, or the node host itself
(:meth:`NodeImex.close`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from services.imex_agent import ImexProcess
from services.imex_agent.binaries import ImexStartError, NotAdoptableError
from services.imex_agent.preflight import DaemonRecord, ProcessIdentity
from services.imex_agent.report import UNAVAILABLE, DomainReport, parse_domain_report
from sim.imex import (
    CommandError,
    DaemonState,
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
        return None  # no process of its own

    @property
    def identity(self) -> ProcessIdentity:
        return ProcessIdentity(instance=self._daemon.instance)

    async def wait(self) -> int | None:
        # Forgotten only once it has stopped: an agent that stops waiting (it is going away)
        # leaves the daemon to the next agent of the node.
        try:
            await self._daemon.wait()
        except Exception:
            self._forget(self._daemon)
            return 1
        self._forget(self._daemon)
        return 0

    def reload(self) -> None:
        self._daemon.request_reconnect()

    def takes_reload(self) -> bool:
        # An in-process daemon handles a reconnect request from the moment it exists.
        return True

    async def stop(self, *, timeout_s: float) -> int | None:
        try:
            async with asyncio.timeout(timeout_s):
                await self._daemon.stop()
        finally:
            self._forget(self._daemon)
        return 0

    def release(self) -> None:
        pass  # the node keeps the daemon; nothing is held for the agent


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
        self._resolver = Resolver(hosts_file, system=False)
        self._timing = timing
        self._daemons: set[ImexDaemon] = set()
        self._started: list[str] = []
        self._directory = directory or DaemonDirectory()
        self.programs_installed = True
        """Whether the node has the IMEX programs (``cdo sim fault NODE --imex-programs``)."""

    @property
    def running(self) -> int:
        """Daemons of this node that have not stopped."""
        return len(self._daemons)

    @property
    def started(self) -> tuple[str, ...]:
        """The instance id of every daemon this node started, in order: an in-process daemon
        has no pid, and a new instance id is how its peers tell that it restarted."""
        return tuple(self._started)

    async def start(self, config: Path, *, output: Path) -> ImexProcess:
        try:
            daemon = ImexDaemon(load_config(config), resolver=self._resolver, timing=self._timing)
            await daemon.start()
        except (ImexConfigError, SimStartError) as exc:
            raise ImexStartError(str(exc)) from exc
        # Held until it stops, so that a power loss finds every daemon of the node.
        self._daemons.add(daemon)
        self._started.append(daemon.instance)
        self._directory.add(daemon)
        return _RunningDaemon(daemon, forget=self._forget)

    def adopt(self, record: DaemonRecord, *, config: Path) -> ImexProcess:
        """The node's running daemon the record names by its instance id."""
        instance = record.process.instance
        if not instance:
            raise NotAdoptableError("the record names no in-process daemon")
        for daemon in self._daemons:
            if daemon.instance == instance and daemon.state is not DaemonState.SHUTTING_DOWN:
                if daemon.config.source is not None and daemon.config.source != config:
                    raise NotAdoptableError(
                        f"daemon {instance} runs with {daemon.config.source}, not {config}"
                    )
                return _RunningDaemon(daemon, forget=self._forget)
        raise NotAdoptableError(f"no daemon {instance} runs on this node")

    def missing_programs(self) -> tuple[str, ...]:
        """Both programs while the node is without them, as on a node without the driver's
        nvidia-imex package; nothing otherwise."""
        return () if self.programs_installed else ("nvidia-imex", "nvidia-imex-ctl")

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

    async def close(self, *, timeout_s: float = 5.0) -> None:
        """Stop every daemon of the node politely (the node host itself is stopping); what has
        not stopped after ``timeout_s`` is killed."""
        daemons, self._daemons = self._daemons, set()
        for daemon in daemons:
            self._directory.discard(daemon)
        try:
            async with asyncio.timeout(timeout_s):
                await asyncio.gather(*(d.stop() for d in daemons), return_exceptions=True)
        except TimeoutError:
            await asyncio.gather(*(d.kill() for d in daemons), return_exceptions=True)

    async def power_loss(self) -> None:
        """Kill every daemon of the node at once, as a power cut would."""
        daemons, self._daemons = self._daemons, set()
        for daemon in daemons:
            self._directory.discard(daemon)
        await asyncio.gather(*(daemon.kill() for daemon in daemons), return_exceptions=True)
