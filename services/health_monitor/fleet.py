"""The circuit breaker's thin shell for one node: the fleet's Nodes in, steps, Events, metrics.

    fleet = Fleet(node_name=name, settings=settings.breaker, metrics=metrics,
                  nodes=informer.cache, wall_clock=utc_now)
    informer.add_handler(lambda old, new: fleet.observe(old, new) and dirty.set())
    step = fleet.step(health=desired, node=own_node, clique=clique)   # in each reconcile
    ...write the Node: step.cap bounds the taint, fleet.annotation(step) is the record...
    await fleet.report(recorder, written, health)

The monitor's Node informer watches every Node while the breaker is on (``node_selector``
narrows it). :meth:`Fleet.observe` runs in that informer's handler: when the watch delivers
this node's own ``pending`` record, it decides the claim right there, from the cache as of
that event (the serialisation argument is in ``breaker``). It also tells the monitor when
another node's change matters: while this node is held back, any change in what another
node counts for may make room. Everything else is ``breaker`` (pure) and ``ledger``.

**Clock skew.** A record's ``at`` is written by its node's clock, which may be ahead of or
behind this one's by any amount. The monitor never compares another node's stamp with its own
clock: it measures how long it has seen each record of another node on its own monotonic clock
(shared/sightings.py) and hands the pure functions the peer with ``at`` moved to that moment on
its own wall clock, so ``now - at`` is a duration on one clock. A record counts against the caps
for at least ``window_s`` (or ``claim_timeout_s``) after this monitor first saw it, never less,
whatever the clocks say; the node's own record is judged by its own clock, which wrote it. A
monitor that restarts sees every record afresh: it may hold NoExecute back longer, never less.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Protocol

import msgspec

from services.health_monitor.breaker import (
    Admission,
    BreakerStep,
    admit,
    breaker_step,
    next_change,
)
from services.health_monitor.faults import Reaction, reaction_of
from services.health_monitor.ledger import (
    Peer,
    RecordState,
    encode_record,
    fault_reaction,
    peer_of,
)
from services.health_monitor.metrics import HealthMetrics
from services.health_monitor.settings import BreakerSettings
from services.health_monitor.state import NodeHealth
from shared.kube.models import Node
from shared.kube.recorder import EventRecorder
from shared.kube.resources import NODES
from shared.sightings import Sightings

log = logging.getLogger("cdo.health_monitor")

REASON_WITHHELD = "GpuFaultTaintWithheld"
REASON_RELEASED = "GpuFaultTaintReleased"


class NodeCache(Protocol):
    def objects(self) -> list[Node]: ...


class Fleet:
    """The breaker of one node's monitor."""

    def __init__(
        self,
        *,
        node_name: str,
        settings: BreakerSettings,
        metrics: HealthMetrics,
        nodes: NodeCache,
        wall_clock: Callable[[], datetime],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._name = node_name
        self._settings = settings
        self._metrics = metrics
        self._nodes = nodes
        self._wall = wall_clock
        # Others' records by (node, state, at): when this monitor first saw each one.
        self._sightings: Sightings[tuple[str, str, datetime]] = Sightings(clock)
        self.verdict: Admission | None = None  # the decision on this node's latest claim
        self.withheld: Admission | None = None  # the hold the last step reported
        self._held = False  # this node's record says held: other nodes' changes matter
        self._reported: Admission | None = None  # the hold the last Event reported
        self._counted: datetime | None = None  # the claim whose decision was counted
        self._released = False  # an Event is due: NoExecute granted after a hold
        metrics.breaker_withheld.set(0)

    @property
    def enabled(self) -> bool:
        return self._settings.enabled

    def peers(self) -> list[Peer]:
        """Every Node as the breaker counts it, others' records timed on this monitor's clock
        (the module docstring)."""
        now = self._wall()
        peers = [peer_of(node) for node in self._nodes.objects()]
        seen = [self._seen(peer, now=now) for peer in peers]
        self._sightings.retain(
            (peer.name, peer.record.state, peer.record.at)
            for peer in peers
            if peer.record is not None and peer.name != self._name
        )
        return seen

    def _sight(self, node: Node) -> None:
        """Start timing another node's record the moment the watch delivers it."""
        record = peer_of(node).record
        if record is not None:
            self._sightings.age_s((node.metadata.name, record.state, record.at))

    def _seen(self, peer: Peer, *, now: datetime) -> Peer:
        record = peer.record
        if record is None or peer.name == self._name:
            return peer
        age = timedelta(seconds=self._sightings.age_s((peer.name, record.state, record.at)))
        return msgspec.structs.replace(peer, record=msgspec.structs.replace(record, at=now - age))

    # -- the informer's handler ---------------------------------------------------------------

    def observe(self, old: Node | None, new: Node | None) -> bool:
        """Take in one change of a Node; True when this node should be evaluated again."""
        current = new if new is not None else old
        if current is None:
            return False
        if current.metadata.name != self._name:
            if new is not None:
                self._sight(new)
            if not self._held:
                return False
            before = peer_of(old) if old is not None else None
            after = peer_of(new) if new is not None else None
            return before != after
        if new is None:
            return False
        record = peer_of(new).record
        self._held = record is not None and record.state is RecordState.HELD
        if record is None or record.state is not RecordState.PENDING:
            return False
        if self.verdict is not None and self.verdict.claim == record.at:
            return False  # decided when the watch first delivered it; later is not "as of"
        self.verdict = admit(
            me=self._name,
            clique=record.clique,
            peers=self.peers(),
            now=self._wall(),
            settings=self._settings,
            claim=record.at,
        )
        return True

    # -- the reconcile ------------------------------------------------------------------------

    def step(self, *, health: NodeHealth, node: Node, clique: str) -> BreakerStep:
        """The breaker's step for ``health`` (the desired health without the breaker)."""
        me = peer_of(node)
        held = me.record is not None and me.record.state is RecordState.HELD
        step = breaker_step(
            wants=health.reaction,
            raw=reaction_of(health.faults),
            current=fault_reaction(node),
            record=me.record,
            verdict=self.verdict,
            previous=self.withheld,
            me=self._name,
            clique=clique or me.clique,
            peers=self.peers() if held else (),  # only a held node looks for room
            now=self._wall(),
            settings=self._settings,
        )
        self.withheld = step.withheld
        self._metrics.breaker_withheld.set(1 if step.withheld is not None else 0)
        decided = step.decided
        if decided is not None and decided.claim != self._counted:
            self._counted = decided.claim
            self._metrics.breaker_decisions.labels(
                "granted" if decided.granted else "withheld"
            ).inc()
            if not decided.granted:
                log.warning(
                    "NoExecute withheld by the circuit breaker",
                    extra={
                        "node": self._name,
                        "cap": decided.describe(window_s=self._settings.window_s),
                    },
                )
        self._released = self._released or step.released
        return step

    def annotation(self, step: BreakerStep) -> str | None:
        return encode_record(step.record) if step.record is not None else None

    def describe(self, step: BreakerStep) -> str | None:
        """The hold in words for the condition, None when nothing is held back."""
        if step.withheld is None:
            return None
        return step.withheld.describe(window_s=self._settings.window_s)

    def deadline(self, node: Node | None) -> float | None:
        """Seconds from now until the step can change by time alone, if it can."""
        if node is None or not self.enabled:
            return None
        me = peer_of(node)
        held = me.record is not None and me.record.state is RecordState.HELD
        now = self._wall()
        moment = next_change(
            record=me.record,
            peers=self.peers() if held else (),
            now=now,
            settings=self._settings,
        )
        return None if moment is None else max(0.0, (moment - now).total_seconds())

    async def report(self, recorder: EventRecorder | None, node: Node, health: NodeHealth) -> None:
        """Kubernetes Events for the breaker's transitions, once the Node shows them."""
        withheld = self.withheld if health.reaction < Reaction.NO_EXECUTE else None
        released, self._released = self._released, False
        if withheld is None:
            self._reported = None
        elif _changed(self._reported, withheld):
            self._reported = withheld
            if recorder is not None:
                await recorder.record(
                    NODES,
                    node,
                    type_="Warning",
                    reason=REASON_WITHHELD,
                    message="NoExecute withheld by the circuit breaker, NoSchedule instead: "
                    + withheld.describe(window_s=self._settings.window_s),
                )
        if released and recorder is not None and health.reaction is Reaction.NO_EXECUTE:
            await recorder.record(
                NODES,
                node,
                type_="Normal",
                reason=REASON_RELEASED,
                message="the circuit breaker has room again: NoExecute applied to the fault "
                "it had held back",
            )


def _changed(before: Admission | None, after: Admission) -> bool:
    if before is None:
        return True
    return (before.scope, before.clique, before.limit) != (after.scope, after.clique, after.limit)
