"""Each hosted node's IMEX daemon, simulated in this process behind the agent's ``Imex`` handle.

The IMEX agent drives its daemon through :class:`services.imex_agent.Imex`; here that handle
starts a :class:`sim.imex.ImexDaemon` in the event loop instead of an ``nvidia-imex`` process,
and asks it the way ``nvidia-imex-ctl`` would (the same command-service queries over TCP). The
daemon resolves its node map through the node's own hosts file, which the agent manages.

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
    ImexConfigError,
    ImexDaemon,
    Resolver,
    Timing,
    load_config,
    local_endpoint,
    query_domain,
    query_status,
    render_json,
)
from sim.imex import ImexStartError as SimStartError


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


class NodeImex:
    """The IMEX programs of one hosted node (implements the agent's ``Imex`` Protocol)."""

    def __init__(self, *, hosts_file: Path, timing: Timing) -> None:
        self._resolver = Resolver(hosts_file)
        self._timing = timing
        self._daemons: set[ImexDaemon] = set()

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
        return _RunningDaemon(daemon, forget=self._daemons.discard)

    async def query_state(self, config: Path) -> str:
        try:
            status = await query_status(local_endpoint(load_config(config)))
        except (CommandError, ImexConfigError):
            return UNAVAILABLE
        return status.state.value

    async def query_domain(self, config: Path) -> DomainReport:
        view = await query_domain(load_config(config), resolver=self._resolver)
        return parse_domain_report(render_json(view))

    async def power_loss(self) -> None:
        """Kill every daemon of the node at once, as a power cut would."""
        daemons, self._daemons = self._daemons, set()
        await asyncio.gather(*(daemon.kill() for daemon in daemons), return_exceptions=True)
