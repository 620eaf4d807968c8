"""The fault announcer of one node: NodeFault and NodeRecovered events, their trace, their Events.

    announcer = FaultAnnouncer(node_name=name, publisher=bus, metrics=metrics,
                               settings=settings, tracer=tracer, recorder=recorder, now=clock())
    await announcer.announce(step.announcements, now=now, about=about)   # each reconcile
    ...write the Node, with announcer.trace_annotation(episode_open=...) among its annotations...
    await announcer.node_written(node, reaction=health.reaction, about=about)

It acts on the announcements :func:`state.advance` returns, and holds what they need between
evaluations:

- **the rate limit**: fault events pass a token bucket (``CDO_HEALTH_EVENT_BURST``,
  ``CDO_HEALTH_EVENT_RATE_PER_S``); the fault that made the taint stronger always goes out;
- **the recovery**: an ended episode's NodeRecovered waits until the Node has been written
  without the fault taint, or goes out just before the next episode's first faults;
- **the fault's trace**: the span that announces a new episode is the root of the fault's trace;
  later announcements of the episode and its recovery are spans of that trace. Its context goes
  on the Node as ``cdo.dev/fault-trace-context`` while the episode is open and spans are exported;
- **Kubernetes Events** (``GpuFault``, ``GpuRecovered``) for what was published, recorded once
  the Node has been written.

Events are best effort: a publish that fails is counted and logged, the Node carries the facts.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Protocol

import msgspec
from opentelemetry.context import Context
from opentelemetry.trace import Span, Tracer

from services.health_monitor.faults import Fault, Reaction
from services.health_monitor.metrics import HealthMetrics
from services.health_monitor.ratelimit import TokenBucket
from services.health_monitor.settings import MonitorSettings
from services.health_monitor.state import (
    AnnounceFaults,
    Announcement,
    AnnounceRecovery,
    Episode,
)
from shared.crds.names import FAULT_TRACE_CONTEXT_ANNOTATION
from shared.events import Event, NodeFault, NodeRecovered
from shared.events.vocabulary import FaultScope
from shared.kube.models import Node
from shared.kube.recorder import EventRecorder
from shared.kube.resources import NODES
from shared.tracing import annotations_for, context_from_annotations, exports

log = logging.getLogger("cdo.health_monitor")

# Kubernetes Events waiting for the Node to be written; more in one storm are dropped.
_MAX_UNRECORDED = 50


class Publisher(Protocol):
    """Where events go: the service's EventBus."""

    async def publish(self, event: Event) -> None: ...


class About(msgspec.Struct, frozen=True, kw_only=True):
    """What an event says about where the node is: its clique and its GPUs' UUIDs."""

    clique: str = ""
    uuids: Mapping[int, str] = msgspec.field(default_factory=dict)

    def gpu_uuids(self, gpus: Iterable[int | None]) -> tuple[str, ...]:
        known = sorted({gpu for gpu in gpus if gpu is not None and gpu in self.uuids})
        return tuple(self.uuids[gpu] for gpu in known)


class _Ended(msgspec.Struct, frozen=True, kw_only=True):
    """An episode whose recovery is not announced yet, and the trace it belongs to."""

    episode: Episode
    trace: str | None


class FaultAnnouncer:
    """Publishes one node's fault episodes, rate-limited, each episode one trace."""

    def __init__(
        self,
        *,
        node_name: str,
        publisher: Publisher,
        metrics: HealthMetrics,
        settings: MonitorSettings,
        tracer: Tracer | None,
        recorder: EventRecorder | None,
        now: float,
    ) -> None:
        self._node_name = node_name
        self._publisher = publisher
        self._metrics = metrics
        self._hold_down_s = settings.hold_down_s
        self._tracer = tracer
        self._recorder = recorder
        self._bucket = TokenBucket(
            capacity=settings.event_burst, rate_per_s=settings.event_rate_per_s, now=now
        )
        self._trace: str | None = None  # the traceparent of the open episode's trace
        self._ended: _Ended | None = None
        self._unrecorded: list[Fault] = []  # published, not yet recorded as Kubernetes Events
        self._recovery_unrecorded = False

    def resume_trace(self, trace: str | None) -> None:
        """Go on with the trace of an episode that was open before a restart."""
        self._trace = trace

    def trace_annotation(self, *, episode_open: bool) -> dict[str, str | None] | None:
        """The fault's trace context the Node should carry: only while an episode is open and
        spans are exported (with tracing off the Node is written as it always was)."""
        if not exports(self._tracer):
            return None
        return {FAULT_TRACE_CONTEXT_ANNOTATION: self._trace if episode_open else None}

    async def announce(
        self, announcements: Sequence[Announcement], *, now: float, about: About
    ) -> None:
        """Act on one step's announcements, in order."""
        for announcement in announcements:
            if isinstance(announcement, AnnounceRecovery):
                # Announced once the Node shows it; the trace goes with it.
                self._ended = _Ended(episode=announcement.episode, trace=self._trace)
                self._trace = None
            else:
                if announcement.begins_episode:
                    await self._recovered(about)  # the old episode's end goes out first
                await self._faults(announcement, now=now, about=about)

    async def node_written(self, node: Node | None, *, reaction: Reaction, about: About) -> None:
        """The Node shows ``reaction``: a recovery waiting for that goes out, then the Events."""
        if reaction is Reaction.NONE:
            await self._recovered(about)
        await self._record(node)

    async def _faults(self, announcement: AnnounceFaults, *, now: float, about: About) -> None:
        """Publish the faults the rate limit lets through, in the episode's trace."""
        started = announcement.begins_episode
        if started:
            self._metrics.episodes.inc()
        published: list[Fault] = []
        for index, fault in enumerate(announcement.faults):
            # The fault that made the taint stronger always goes out: it is the one readers act on.
            if (announcement.urgent and index == 0) or self._bucket.take(now):
                published.append(fault)
            else:
                self._metrics.fault_events.labels("suppressed").inc()
        if not published and not started:
            return
        # A new episode's span is the root of the fault's trace; later announcements of the
        # same episode are its children.
        with self._span("health fault", None if started else self._trace) as span:
            if started and span is not None:
                self._trace = annotations_for(span, key=FAULT_TRACE_CONTEXT_ANNOTATION).get(
                    FAULT_TRACE_CONTEXT_ANNOTATION
                )
            for fault in published:
                await self._publish_fault(fault, about)
        self._unrecorded = [*self._unrecorded, *published][-_MAX_UNRECORDED:]

    async def _recovered(self, about: About) -> None:
        ended, self._ended = self._ended, None
        if ended is None:
            return
        with self._span("health recovered", ended.trace):
            self._metrics.recoveries.inc()
            message = (
                f"no GPU, NVLink or fabric fault for {self._hold_down_s:g}s; "
                f"cleared: {', '.join(sorted(ended.episode.signals)) or 'none'}"
            )
            log.info("node recovered", extra={"node": self._node_name, "recovery": message})
            await self._publish(
                NodeRecovered(
                    node=self._node_name,
                    clique=about.clique,
                    gpus=about.gpu_uuids(ended.episode.gpus),
                    signals=tuple(sorted(ended.episode.signals)),
                    message=message,
                )
            )
        self._recovery_unrecorded = True

    @contextlib.contextmanager
    def _span(self, name: str, parent: str | None) -> Iterator[Span | None]:
        """A span of the fault's trace: a child of ``parent``, or a new root when None."""
        if self._tracer is None:
            yield None
            return
        context = context_from_annotations(
            {FAULT_TRACE_CONTEXT_ANNOTATION: parent or ""}, key=FAULT_TRACE_CONTEXT_ANNOTATION
        )
        with self._tracer.start_as_current_span(
            name, context=context or Context(), attributes={"cdo.node": self._node_name}
        ) as span:
            yield span

    async def _publish_fault(self, fault: Fault, about: About) -> None:
        log.warning(
            "node fault",
            extra={
                "node": self._node_name,
                "rule": fault.rule,
                "severity": fault.severity.value,
                "action": fault.action.value,
                "fault": fault.message,
            },
        )
        event = NodeFault(
            node=self._node_name,
            clique=about.clique,
            gpus=about.gpu_uuids([fault.gpu]),
            signal=fault.signal,
            code=fault.code,
            severity=fault.severity.value,
            action=fault.action.value,
            message=fault.message,
            gpu_index=fault.gpu,
            scope=FaultScope.GPU if fault.confined else FaultScope.NODE,
        )
        if await self._publish(event):
            self._metrics.fault_events.labels("published").inc()

    async def _publish(self, event: Event) -> bool:
        try:
            await self._publisher.publish(event)
        except Exception as exc:  # the Node carries the same facts; an event is best effort
            self._metrics.errors.labels("health-events").inc()
            log.warning("could not publish", extra={"node": self._node_name, "error": repr(exc)})
            return False
        return True

    async def _record(self, node: Node | None) -> None:
        """Kubernetes Events on the Node, for ``kubectl describe node``, once it was written."""
        published, self._unrecorded = self._unrecorded, []
        recovered, self._recovery_unrecorded = self._recovery_unrecorded, False
        if self._recorder is None or node is None:
            return
        for fault in published:
            await self._recorder.record(
                NODES,
                node,
                type_="Warning" if fault.wanted > Reaction.NONE else "Normal",
                reason="GpuFault",
                message=f"{fault.severity.value}, {fault.action.value}: {fault.message}",
            )
        if recovered:
            await self._recorder.record(
                NODES,
                node,
                type_="Normal",
                reason="GpuRecovered",
                message=f"no GPU fault for {self._hold_down_s:g}s",
            )
