"""The circuit breaker's thin shell for one node: its own Node in, steps, Events, metrics.

    fleet = Fleet(node_name=name, settings=settings.breaker, metrics=metrics, wall_clock=utc_now)
    informer.add_handler(lambda old, new: fleet.observe(new) and dirty.set())
    step = fleet.step(health=desired, node=own_node, clique=clique)   # in each reconcile
    ...write the Node: step.cap bounds the taint, fleet.annotation(step) is the record...
    await fleet.report(recorder, written, health)

The monitor reads only its own Node: its record, and the arbiter's verdict on it (the clique
allocator's leader answers claims; shared/breaker). :meth:`Fleet.observe` notes the moment this
monitor first sees the answer to its pending claim, on its own wall clock, which also wrote the
claim's ``at``: whether the answer came in time is a duration on one clock, whatever the
arbiter's clock says (``breaker``). A monitor that restarts sees the answer afresh: it may
claim once more, never act on an answer too late.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from services.health_monitor.breaker import BreakerStep, breaker_step, next_change
from services.health_monitor.faults import Reaction, reaction_of
from services.health_monitor.metrics import HealthMetrics
from services.health_monitor.settings import BreakerSettings
from services.health_monitor.state import NodeHealth
from shared.breaker import (
    Admission,
    Record,
    RecordState,
    decode_record,
    decode_verdict,
    encode_record,
)
from shared.crds.names import BREAKER_ANNOTATION, BREAKER_VERDICT_ANNOTATION, GPU_FAULT_TAINT
from shared.kube.models import Node
from shared.kube.recorder import EventRecorder
from shared.kube.resources import NODES

log = logging.getLogger("cdo.health_monitor")

REASON_WITHHELD = "GpuFaultTaintWithheld"
REASON_RELEASED = "GpuFaultTaintReleased"


def fault_reaction(node: Node) -> Reaction:
    """The fault taint the Node carries now."""
    effects = {taint.effect for taint in node.spec.taints if taint.key == GPU_FAULT_TAINT}
    if "NoExecute" in effects:
        return Reaction.NO_EXECUTE
    return Reaction.NO_SCHEDULE if "NoSchedule" in effects else Reaction.NONE


def record_of(node: Node) -> Record | None:
    return decode_record(node.metadata.annotations.get(BREAKER_ANNOTATION))


class Fleet:
    """The breaker of one node's monitor."""

    def __init__(
        self,
        *,
        node_name: str,
        settings: BreakerSettings,
        metrics: HealthMetrics,
        wall_clock: Callable[[], datetime],
    ) -> None:
        self._name = node_name
        self._settings = settings
        self._metrics = metrics
        self._wall = wall_clock
        self.verdict: Admission | None = None  # the answer to this node's latest claim
        self.room: datetime | None = None  # the held record the arbiter offers room to
        self.withheld: Admission | None = None  # the hold the last step reported
        self._reported: Admission | None = None  # the hold the last Event reported
        self._counted: datetime | None = None  # the claim whose decision was counted
        self._released = False  # an Event is due: NoExecute granted after a hold
        metrics.breaker_withheld.set(0)

    @property
    def enabled(self) -> bool:
        return self._settings.enabled

    # -- the informer's handler ---------------------------------------------------------------

    def observe(self, node: Node | None) -> bool:
        """Take in a change of this node's Node; True when it brings an answer to evaluate."""
        if node is None or not self.enabled:
            return False
        record = record_of(node)
        verdict = decode_verdict(node.metadata.annotations.get(BREAKER_VERDICT_ANNOTATION))
        if record is None or verdict is None or verdict.claim != record.at:
            return False
        if record.state is RecordState.HELD:
            if verdict.room and self.room != record.at:
                self.room = record.at
                return True
            if not verdict.room and not verdict.granted and self.withheld is None:
                # A monitor that restarted while held: the refusal on the Node says why.
                self.withheld = verdict.admission(seen_at=self._wall())
            return False
        if record.state is not RecordState.PENDING or verdict.room:
            return False
        if self.verdict is not None and self.verdict.claim == record.at:
            return False  # already seen: its first sighting is what counts
        self.verdict = verdict.admission(seen_at=self._wall())
        return True

    # -- the reconcile ------------------------------------------------------------------------

    def step(self, *, health: NodeHealth, node: Node, clique: str) -> BreakerStep:
        """The breaker's step for ``health`` (the desired health without the breaker)."""
        record = record_of(node)
        step = breaker_step(
            wants=health.reaction,
            raw=reaction_of(health.faults),
            current=fault_reaction(node),
            record=record,
            verdict=self.verdict,
            room=record is not None and self.room == record.at,
            previous=self.withheld,
            clique=clique or (record.clique if record is not None else ""),
            now=self._wall(),
            settings=self._settings,
        )
        self.withheld = step.withheld
        self._metrics.breaker_withheld.set(
            1 if step.withheld is not None or step.undecided_since is not None else 0
        )
        decided = step.decided
        if decided is not None and decided.claim != self._counted:
            self._counted = decided.claim
            self._metrics.breaker_decisions.labels(
                "granted" if decided.granted else "withheld"
            ).inc()
            if not decided.granted:
                log.warning(
                    "NoExecute withheld by the circuit breaker",
                    extra={"node": self._name, "cap": decided.describe()},
                )
        self._released = self._released or step.released
        return step

    def annotation(self, step: BreakerStep) -> str | None:
        return encode_record(step.record) if step.record is not None else None

    def describe(self, step: BreakerStep) -> str | None:
        """The hold in words for the condition, None when nothing is held back."""
        if step.withheld is not None:
            return step.withheld.describe()
        if step.undecided_since is not None:
            return (
                "no answer to this node's claim for NoExecute since "
                f"{step.undecided_since:%Y-%m-%dT%H:%M:%SZ} (the clique allocator's leader "
                "answers claims)"
            )
        return None

    def deadline(self, node: Node | None) -> float | None:
        """Seconds from now until the step can change by time alone, if it can."""
        if node is None or not self.enabled:
            return None
        now = self._wall()
        moment = next_change(record=record_of(node), now=now, settings=self._settings)
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
                    + withheld.describe(),
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
