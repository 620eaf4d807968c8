"""Watching the node's IMEX through ``nvidia-imex-ctl`` and reporting it (event + condition).

While the daemon starts it is asked with ``-q`` until it says READY; from then on with
``-N -j``, whose row for this node carries the same daemon state plus the domain state and this
node's view of every peer (``-q`` again as soon as that row is not READY). Polls come every
``poll_interval_s`` while nothing changes and every ``fast_poll_interval_s`` for
``fast_poll_window_s`` after a change: one the agent made, one it observed, or a peer's
NodeImexState event (a peer that restarts its daemon changes this node's view too).

The domain state and the peers are read over the roster's members (:mod:`status`): the node
map lists every slot, and IMEX counts the empty ones as nodes that are down.

Every change (see :func:`status.same_report`) is published as a NodeImexState event (and the
current state once more after every connection of the bus, :meth:`StatusReporter.republish`,
so the KV snapshot of the node is up to date after a NATS outage), and the
``cdo.dev/ImexReady`` condition is written when its status, reason or message changes. Failing
writes are retried at the next poll; failing publishes are logged and counted (the condition and
the KV snapshot of the next change carry the state anyway).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from services.imex_agent.binaries import Imex
from services.imex_agent.daemon import DaemonController
from services.imex_agent.metrics import AgentMetrics
from services.imex_agent.report import READY, DomainReport, ReportError
from services.imex_agent.roster import Roster
from services.imex_agent.settings import ImexSettings
from services.imex_agent.status import (
    NOT_RUNNING,
    ConditionValue,
    Observation,
    Phase,
    condition_patch,
    condition_value,
    node_event,
    same_report,
)
from shared.events import NodeImexState
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.resources import NODES

log = logging.getLogger("cdo.imex_agent.reporter")

Publish = Callable[[NodeImexState], Awaitable[None]]


class StatusReporter:
    """Polls the ctl, publishes NodeImexState, writes the node condition."""

    def __init__(
        self,
        *,
        node: str,
        address: str,
        settings: ImexSettings,
        imex: Imex,
        controller: DaemonController,
        client: KubeClient,
        publish: Publish | None,
        metrics: AgentMetrics,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._node = node
        self._address = address
        self._settings = settings
        self._imex = imex
        self._controller = controller
        self._client = client
        self._publish = publish
        self._metrics = metrics
        self._clock = clock
        self._wake = asyncio.Event()
        self._fast_until = 0.0
        self._last_state = NOT_RUNNING
        self.event: NodeImexState | None = None
        self.condition: ConditionValue | None = None
        self._written: ConditionValue | None = None
        self._transition = datetime.now(UTC)
        self._seed_status = ""
        self.history: list[NodeImexState] = []
        self._history_limit = 200
        self._republish = False

    @property
    def ready(self) -> bool:
        """The node's daemon is ours, running, and READY."""
        event = self.event
        return (
            event is not None
            and event.daemon_state == READY
            and self._controller.state.phase is Phase.RUNNING
        )

    def seed_condition(self, status: str, transition: datetime | None) -> None:
        """What the node's condition said before this agent started (keeps its transition)."""
        if transition is not None:
            self._transition = transition
        self._seed_status = status

    async def republish(self) -> None:
        """Publish the state observed at the next poll (now) even if it has not changed."""
        self._republish = True
        self._wake.set()

    def poke(self) -> None:
        """Poll now, and fast for a while."""
        self._fast_until = self._clock() + self._settings.fast_poll_window_s
        self._wake.set()

    async def run(self) -> None:
        while True:
            self._wake.clear()
            await self.report_once()
            now = self._clock()
            settings = self._settings
            interval = (
                settings.fast_poll_interval_s
                if now < self._fast_until
                else settings.poll_interval_s
            )
            try:
                async with asyncio.timeout(interval):
                    await self._wake.wait()
            except TimeoutError:
                pass

    async def report_once(self) -> None:
        observation = await self._observe()
        roster = self._controller.roster or Roster(clique=observation.control.clique)
        event = node_event(
            observation,
            node=self._node,
            address=self._address,
            roster=roster,
            slot=self._controller.slot,
        )
        republish, self._republish = self._republish, False
        if republish or not same_report(self.event, event):
            self.event = event
            self.history.append(event)
            del self.history[: -self._history_limit]
            self._fast_until = self._clock() + self._settings.fast_poll_window_s
            log.info(
                "IMEX state",
                extra={
                    "daemon_state": event.daemon_state,
                    "domain_state": event.domain_state,
                    "peers": {peer.node: peer.state for peer in event.peers},
                    "restarts": event.restarts,
                },
            )
            await self._send(event)
        self.condition = condition_value(observation, event)
        if self.condition != self._written:
            await self._write_condition(self.condition)

    async def _observe(self) -> Observation:
        control = self._controller.state
        if control.phase is not Phase.RUNNING or not self._controller.running:
            self._last_state = NOT_RUNNING
            return Observation(control=control)
        pid = self._controller.pid
        state = READY if self._last_state == READY else await self._query_state()
        domain: DomainReport | None = None
        if state == READY:
            domain = await self._query_domain()
            own = domain.row(self._address) if domain is not None else None
            if own is None or own.state != READY:
                domain = None
                state = await self._query_state()
        control = self._controller.state
        if control.phase is not Phase.RUNNING or self._controller.pid != pid:
            # The daemon went away (or was replaced) while it was being asked.
            self._last_state = NOT_RUNNING
            return Observation(control=control)
        self._last_state = state
        return Observation(control=control, daemon_state=state, domain=domain)

    async def _query_state(self) -> str:
        state = await self._imex.query_state(self._controller.paths.config)
        self._metrics.ctl_calls.labels("q", "ok").inc()
        return state

    async def _query_domain(self) -> DomainReport | None:
        try:
            report = await self._imex.query_domain(self._controller.paths.config)
        except ReportError as exc:
            self._metrics.ctl_calls.labels("N", "error").inc()
            log.warning("nvidia-imex-ctl -N -j failed", extra={"error": str(exc)})
            return None
        self._metrics.ctl_calls.labels("N", "ok").inc()
        return report

    async def _send(self, event: NodeImexState) -> None:
        if self._publish is None:
            return
        try:
            await self._publish(event)
        except Exception as exc:
            self._metrics.errors.labels("publish").inc()
            log.warning("could not publish the IMEX state", extra={"error": str(exc)})

    async def _write_condition(self, value: ConditionValue) -> None:
        previous = self._written.status if self._written is not None else self._seed_status
        now = datetime.now(UTC)
        if value.status != previous:
            self._transition = now
        try:
            await self._client.patch(
                NODES,
                self._node,
                condition_patch(value, transition=self._transition, now=now),
                subresource="status",
                patch_type="strategic",
            )
        except KubeApiError as exc:
            self._metrics.errors.labels("node_condition").inc()
            log.warning("could not write the node condition", extra={"error": str(exc)})
            return
        if value.status != previous:
            log.info(
                "condition cdo.dev/ImexReady",
                extra={"status": value.status, "reason": value.reason, "detail": value.message},
            )
        self._written = value
