"""The health monitor of one node: NVML in, events and Node writes out.

    monitor = HealthMonitor(node_name="gb200-r0-t00", nvml=PynvmlNvml(), client=client,
                            publisher=ctx.bus, metrics=ctx.metrics, settings=settings)
    ctx.readiness.add("nvml", lambda: monitor.nvml_available)
    ctx.supervisor.start("health monitor", monitor.run())

Everything the monitor needs comes in as arguments, so a simulator can run one per simulated
node in one process. :meth:`HealthMonitor.run` runs three loops until cancelled:

- **NVML**: initialise (retrying with backoff while NVML is unavailable, which the node
  reports as condition Unknown and a NoSchedule taint), then read every GPU each
  ``read_interval_s`` and wait for XID events in a worker thread, both feeding
  :class:`Observations`. A lost GPU ends the event subscription (NVML cannot unregister it);
  a new one covers the GPUs that remain.
- **Node**: an informer on the one Node, so a change by anyone (a taint removed by hand, the
  node registered again) is seen and corrected. With the circuit breaker on (the default) it
  watches every Node instead: the other nodes' taints and breaker records are the breaker's
  shared state (``fleet``, ``breaker``, ``ledger``).
- **Reconcile**: whenever something changed, or a hold-down or latch ends, evaluate the pure
  functions of ``state`` (episode, desired health) and ``breaker`` (how strong the taint may
  be), publish fault and recovery events (fault events through a token bucket) and apply the
  desired health to the Node with :class:`NodeWriter`. A failed write is retried with
  backoff; events are best effort, the Node is the source of truth.

Tracing: the span that announces a new fault episode is the root of the fault's trace; while
spans are exported its context goes on the Node as ``cdo.dev/fault-trace-context`` in the same
write as the taint, and comes off when the episode ends. Later announcements of the episode and
its recovery event are spans of that trace, and the domain controller and allocator follow it
for the domains on the node (docs/events.md, "One trace per story").
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Protocol

from opentelemetry.context import Context
from opentelemetry.trace import Span, Tracer

from services.health_monitor.classification import DEFAULT_CLASSIFIER, Classifier
from services.health_monitor.derive import event_signal, node_signals
from services.health_monitor.faults import (
    Fault,
    Reaction,
    fault_key,
    fault_of,
    is_transient,
    signal_family,
)
from services.health_monitor.fleet import Fleet
from services.health_monitor.metrics import HealthMetrics
from services.health_monitor.observations import Observations
from services.health_monitor.ratelimit import TokenBucket
from services.health_monitor.readings import NodeReading, read_node
from services.health_monitor.rules import Severity
from services.health_monitor.settings import MonitorSettings
from services.health_monitor.signals import NvmlUnavailable
from services.health_monitor.state import (
    Episode,
    NodeHealth,
    Step,
    advance,
    desired_health,
    next_deadline,
    resumed_episode,
    resumed_trace,
)
from services.health_monitor.writer import NodeWriter, utc_now
from shared.crds.names import (
    BREAKER_ANNOTATION,
    CLIQUE_LABEL,
    FAULT_TRACE_CONTEXT_ANNOTATION,
    GPU_FAULT_TAINT,
)
from shared.events import Event, NodeFault, NodeRecovered
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.informer import Informer
from shared.kube.models import Node
from shared.kube.recorder import EventRecorder
from shared.kube.resources import NODES
from shared.metrics import Metrics
from shared.nvml import (
    CliqueStatus,
    DeviceEvent,
    EventKind,
    EventSubscription,
    GpuLostError,
    Nvml,
    NvmlCallError,
    NvmlError,
    NvmlUnavailableError,
    node_clique,
    subscribed,
)
from shared.tracing import annotations_for, context_from_annotations, exports

log = logging.getLogger("cdo.health_monitor")

# Kubernetes Events waiting for the Node to be written; more in one storm are dropped.
_MAX_UNRECORDED = 50
# Event kinds that say "a counter or field changed": read now instead of at the next tick.
_READ_ON = frozenset({EventKind.DOUBLE_BIT_ECC, EventKind.RECOVERY_ACTION})


class Publisher(Protocol):
    """Where events go: the service's EventBus."""

    async def publish(self, event: Event) -> None: ...


def _drain(subscription: EventSubscription) -> list[DeviceEvent]:
    """Every event the subscription can still deliver without waiting."""
    events: list[DeviceEvent] = []
    with contextlib.suppress(NvmlError):  # a lost GPU ends the set after its queued events
        while subscription.wait(timeout_s=0):
            while (event := subscription.next_event()) is not None:
                events.append(event)
    return events


def _version(node: Node) -> int | None:
    version = node.metadata.resource_version
    return int(version) if version.isdigit() else None


def _newer(known: Node | None, seen: Node) -> Node:
    """The later of two observations of the Node (writes and watch events race)."""
    if known is None or known.metadata.uid != seen.metadata.uid:
        return seen
    old, new = _version(known), _version(seen)
    if old is not None and new is not None and new < old:
        return known
    return seen


class HealthMonitor:
    """Watches one node's GPUs and keeps its taint, condition, labels and events in step."""

    def __init__(
        self,
        *,
        node_name: str,
        nvml: Nvml,
        client: KubeClient,
        publisher: Publisher,
        metrics: Metrics,
        settings: MonitorSettings,
        classifier: Classifier = DEFAULT_CLASSIFIER,
        tracer: Tracer | None = None,
        recorder: EventRecorder | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.node_name = node_name
        self._nvml = nvml
        self._publisher = publisher
        self._settings = settings
        self._classifier = classifier
        self._tracer = tracer
        self._recorder = recorder
        self._clock = clock
        self.metrics = HealthMetrics(metrics)
        self.metrics.nvml_available.set(0)
        self._writer = NodeWriter(
            client,
            node_name=node_name,
            field_manager=settings.field_manager,
            metrics=self.metrics,
            conflict_retries=settings.conflict_retries,
            wall_clock=wall_clock,
        )
        breaker = settings.breaker
        # With the breaker on, every Node (its state is theirs); otherwise only this one.
        self._informer = Informer(
            client,
            NODES,
            Node,
            field_selector="" if breaker.enabled else f"metadata.name={node_name}",
            label_selector=breaker.node_selector if breaker.enabled else "",
            settings=settings.informer,
            metrics=metrics,
        )
        self._fleet = Fleet(
            node_name=node_name,
            settings=breaker,
            metrics=self.metrics,
            nodes=self._informer.cache,
            wall_clock=wall_clock,
        )
        self._known_clique = ""  # the last clique this node was seen in (breaker scope)
        self._informer.add_handler(self._on_any_node)
        self.observations = Observations(latch_s=settings.xid_latch_s)
        self.episode = Episode()
        self.health: NodeHealth | None = None  # the last desired health evaluated
        self._bucket = TokenBucket(
            capacity=settings.event_burst, rate_per_s=settings.event_rate_per_s, now=clock()
        )
        self._node: Node | None = None
        self._adopted = False  # the first Node seen has been checked for an earlier taint
        self._dirty = asyncio.Event()
        self._read_now = asyncio.Event()
        self._resubscribe = False
        self._nvml_ready = False
        self._uuids: dict[int, str] = {}
        self._lost: frozenset[int] = frozenset()
        self._reading_keys: frozenset[str] = frozenset()
        self._write_pause = settings.write_retry_s
        self._write_retry_at: float | None = None
        self._recovery: Episode | None = None  # ended, announced once the Node is written
        # The traceparent of the open episode's trace, and of the ended one until its recovery
        # is announced (see _fault_span).
        self._fault_trace: str | None = None
        self._recovery_trace: str | None = None
        self._unrecorded: list[Fault] = []  # published, not yet recorded as Kubernetes Events
        self._recovery_unrecorded = False

    # -- public state -------------------------------------------------------------------------

    @property
    def nvml_available(self) -> bool:
        """True once NVML answered a whole reading, False while it cannot be read (readiness)."""
        return self._nvml_ready

    @property
    def node_synced(self) -> bool:
        return self._informer.synced

    async def run(self) -> None:
        """Watch, read and reconcile until cancelled."""
        async with asyncio.TaskGroup() as group:
            group.create_task(self._informer.run(), name=f"health node informer {self.node_name}")
            group.create_task(self._nvml_loop(), name=f"health nvml {self.node_name}")
            group.create_task(self._reconcile_loop(), name=f"health reconcile {self.node_name}")

    # -- the Node -----------------------------------------------------------------------------

    def _on_any_node(self, old: Node | None, new: Node | None) -> None:
        current = new if new is not None else old
        if current is not None and current.metadata.name == self.node_name:
            self._on_node(old, new)
        if self._fleet.observe(old, new):
            self._dirty.set()

    def _on_node(self, _old: Node | None, new: Node | None) -> None:
        if new is None:
            self._node = None  # deleted: read again (and wait for it) before writing
        else:
            if self._node is None:
                self._write_retry_at = None  # the Node is (back) there: no need to wait
            self._adopt(new)
        self._dirty.set()

    def _adopt(self, node: Node) -> None:
        self._node = _newer(self._node, node)
        if self._adopted:
            return
        self._adopted = True
        if self.episode.open:
            return
        effect = next(
            (taint.effect for taint in node.spec.taints if taint.key == GPU_FAULT_TAINT), None
        )
        self.episode = resumed_episode(effect=effect, now=self._clock())
        if self.episode.open:
            # The episode goes on after a restart: so does its trace, if the Node carries it.
            self._fault_trace = resumed_trace(node.metadata.annotations)
            log.info(
                "node already carries the fault taint; keeping it for a hold-down",
                extra={"node": self.node_name, "effect": effect},
            )

    # -- NVML ---------------------------------------------------------------------------------

    async def _nvml_loop(self) -> None:
        pause = self._settings.nvml_retry_s
        while True:
            try:
                await asyncio.to_thread(self._nvml.init)
            except NvmlUnavailableError as exc:
                self._unavailable(str(exc))
                await asyncio.sleep(pause)
                pause = min(pause * 2, self._settings.nvml_retry_max_s)
                continue
            pause = self._settings.nvml_retry_s
            try:
                await self._session()
            except* NvmlUnavailableError as group:
                self._unavailable("; ".join(str(exc) for exc in group.exceptions))
            except* NvmlError as group:
                # A call that failed for another reason: start over with a fresh initialisation.
                self.metrics.errors.labels("health-nvml").inc()
                log.warning(
                    "NVML session failed; initialising again",
                    extra={"node": self.node_name, "error": str(group.exceptions[0])},
                )
            finally:
                self._nvml_ready = False
                with contextlib.suppress(NvmlError):
                    await asyncio.to_thread(self._nvml.shutdown)
            await asyncio.sleep(pause)

    def _unavailable(self, reason: str) -> None:
        if self.observations.unavailable is None:
            log.warning("NVML unavailable", extra={"node": self.node_name, "error": reason})
        self._nvml_ready = False
        self.metrics.nvml_available.set(0)
        signal = NvmlUnavailable(reason=reason)
        verdict = self._classifier.classify(signal)
        fault = fault_of(signal, verdict)
        if not verdict.ignored and self.observations.unavailable is None:
            self.metrics.signals.labels("nvml", verdict.severity.value).inc()
        if self.observations.update_reading(
            [fault] if fault is not None else [], clique=None, unavailable=reason
        ):
            self._dirty.set()
        self._reading_keys = frozenset()

    async def _session(self) -> None:
        """One NVML initialisation: readings and events until NVML becomes unavailable."""
        self._uuids.update(await asyncio.to_thread(self._identities))
        async with asyncio.TaskGroup() as group:
            group.create_task(self._read_loop(), name=f"health readings {self.node_name}")
            group.create_task(self._event_loop(), name=f"health events {self.node_name}")

    def _identities(self) -> dict[int, str]:
        uuids: dict[int, str] = {}
        for gpu in range(self._nvml.device_count()):
            try:
                uuids[gpu] = self._nvml.identity(gpu).uuid
            except (GpuLostError, NvmlCallError):
                continue  # a lost GPU keeps the UUID learnt before, if any
        return uuids

    async def _read_loop(self) -> None:
        previous: NodeReading | None = None
        while True:
            self._read_now.clear()
            started = time.perf_counter()
            try:
                reading = await asyncio.to_thread(read_node, self._nvml)
            except NvmlCallError as exc:
                self.metrics.errors.labels("health-nvml").inc()
                log.warning("reading failed", extra={"node": self.node_name, "error": str(exc)})
            else:
                if reading.unavailable is not None:
                    raise NvmlUnavailableError(reading.unavailable)
                self.metrics.readings.inc()
                self.metrics.reading_seconds.observe(time.perf_counter() - started)
                self._on_reading(reading, previous)
                previous = reading
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._settings.read_interval_s):
                    await self._read_now.wait()

    def _on_reading(self, reading: NodeReading, previous: NodeReading | None) -> None:
        now = self._clock()
        state: list[Fault] = []
        keys: set[str] = set()
        latched = False
        for signal in node_signals(reading, previous=previous):
            verdict = self._classifier.classify(signal)
            if verdict.ignored:
                continue
            key = fault_key(verdict.rule, signal.gpu)
            keys.add(key)
            if key not in self._reading_keys or is_transient(signal):
                self.metrics.signals.labels(signal_family(signal), verdict.severity.value).inc()
            fault = fault_of(signal, verdict)
            if fault is None:
                continue
            if is_transient(signal):
                latched = self.observations.latch(fault, now=now) or latched
            else:
                state.append(fault)
        self._reading_keys = frozenset(keys)
        for gpu in reading.gpus:
            if gpu.errors:
                log.debug("some readings failed", extra={"gpu": gpu.index, "errors": gpu.errors})
        clique = node_clique([gpu.fabric for gpu in reading.gpus if gpu.fabric is not None])
        changed = self.observations.update_reading(state, clique=clique)
        lost = frozenset(gpu.index for gpu in reading.gpus if gpu.lost)
        if lost != self._lost:
            self._lost = lost
            self._resubscribe = True  # a GPU fell off or came back: register the ones there
        if not self._nvml_ready:
            log.info("NVML readable", extra={"node": self.node_name, "gpus": len(reading.gpus)})
        self._nvml_ready = True
        self.metrics.nvml_available.set(1)
        if changed or latched:
            self._dirty.set()

    async def _event_loop(self) -> None:
        while True:
            self._resubscribe = False
            try:
                async with subscribed(self._nvml) as subscription:
                    while True:
                        if self._resubscribe:
                            # Events already queued for the old set are not lost with it.
                            for queued in await asyncio.to_thread(_drain, subscription):
                                self._on_event(queued)
                            break
                        event = subscription.next_event()
                        if event is None:
                            await asyncio.to_thread(
                                subscription.wait, timeout_s=self._settings.event_wait_s
                            )
                        else:
                            self._on_event(event)
            except GpuLostError as exc:
                # NVML cannot unregister a lost GPU: a new subscription skips it.
                log.info("GPU lost; subscribing again", extra={"gpus": list(exc.gpus)})
                self._read_now.set()
            except NvmlCallError as exc:
                self.metrics.errors.labels("health-nvml").inc()
                log.warning(
                    "event subscription failed", extra={"node": self.node_name, "error": str(exc)}
                )
                await asyncio.sleep(self._settings.read_interval_s)

    def _on_event(self, event: DeviceEvent) -> None:
        if event.kind in _READ_ON:
            self._read_now.set()
        signal = event_signal(event)
        if signal is None or not is_transient(signal):
            return  # a recovery action is a state: the reading it triggers reports it
        verdict = self._classifier.classify(signal)
        if verdict.ignored:
            return
        self.metrics.signals.labels(signal_family(signal), verdict.severity.value).inc()
        fault = fault_of(signal, verdict)
        if fault is not None and self.observations.latch(fault, now=self._clock()):
            self._dirty.set()

    # -- reconcile ----------------------------------------------------------------------------

    async def _reconcile_loop(self) -> None:
        while True:
            await self._wait_for_work()
            self._dirty.clear()
            await self._reconcile()

    async def _wait_for_work(self) -> None:
        now = self._clock()
        hold_down_s = self._settings.hold_down_s
        deadlines = [
            moment
            for moment in (
                next_deadline(self.episode, now=now, hold_down_s=hold_down_s),
                self.observations.next_expiry(),
                self._write_retry_at,
                self._breaker_deadline(now),
            )
            if moment is not None
        ]
        if not deadlines:
            await self._dirty.wait()
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0.0, min(deadlines) - now)):
                await self._dirty.wait()

    async def _reconcile(self) -> None:
        now = self._clock()
        hold_down_s = self._settings.hold_down_s
        observations = self.observations
        step = advance(
            self.episode, faults=observations.take_seen(now), now=now, hold_down_s=hold_down_s
        )
        self.episode = step.episode
        if step.recovered is not None:
            self._recovery = step.recovered  # announced once the Node shows it
            self._recovery_trace, self._fault_trace = self._fault_trace, None
        elif step.announce and self._recovery is not None:
            await self._recovered()  # a new episode: the old one's end goes out first
        await self._announce(step, now=now)
        node = await self._current_node(now)
        evaluate = functools.partial(
            desired_health,
            faults=observations.active(now),
            clique=observations.clique,
            episode=self.episode,
            now=now,
            hold_down_s=hold_down_s,
            nvml_unavailable=observations.unavailable,
        )
        health = evaluate()
        breaker: dict[str, str | None] = {}
        if node is not None and self._fleet.enabled:
            # The breaker bounds the taint; the condition says when it holds NoExecute back.
            capped = self._fleet.step(health=health, node=node, clique=self._breaker_clique())
            breaker[BREAKER_ANNOTATION] = self._fleet.annotation(capped)
            health = evaluate(cap=capped.cap, withheld=self._fleet.describe(capped))
        self._observe(health)
        if node is None or (self._write_retry_at is not None and now < self._write_retry_at):
            return
        try:
            written = await self._writer.apply(
                health, node, annotations={**(self._annotations() or {}), **breaker} or None
            )
            self._node = _newer(self._node, written)
        except KubeApiError as exc:
            self._write_failed(exc, now=now)
            return
        self._write_pause = self._settings.write_retry_s
        self._write_retry_at = None
        if self._recovery is not None and health.reaction is Reaction.NONE:
            await self._recovered()
        await self._record(self._node)
        if self._fleet.enabled and self._node is not None:
            await self._fleet.report(self._recorder, self._node, health)

    async def _current_node(self, now: float) -> Node | None:
        if self._node is not None:
            return self._node
        if self._write_retry_at is not None and now < self._write_retry_at:
            return None
        try:
            self._adopt(await self._writer.read())
        except KubeApiError as exc:
            self._write_failed(exc, now=now)
            return None
        return self._node

    def _write_failed(self, exc: KubeApiError, *, now: float) -> None:
        self.metrics.errors.labels("health-node").inc()
        log.warning(
            "could not bring the node to its desired health; retrying",
            extra={"node": self.node_name, "error": str(exc), "pause_s": self._write_pause},
        )
        self._node = None  # read it again before the next write
        self._write_retry_at = now + max(self._write_pause, exc.retry_after_s)
        self._write_pause = min(self._write_pause * 2, self._settings.write_retry_max_s)

    def _observe(self, health: NodeHealth) -> None:
        self.health = health
        self.metrics.reaction.set(int(health.reaction))
        for severity in (Severity.WARNING, Severity.FATAL):
            count = sum(1 for fault in health.faults if fault.severity is severity)
            self.metrics.active_faults.labels(severity.value).set(count)

    def _breaker_deadline(self, now: float) -> float | None:
        if self._node is None:
            return None
        remaining = self._fleet.deadline(self._node)
        return None if remaining is None else now + remaining

    def _breaker_clique(self) -> str:
        """The clique the breaker counts this node in: the one it is in, or was last seen in
        (a fabric fault takes the label away, not the node out of its clique's count)."""
        clique = self.observations.clique
        if clique is not None and clique.status is CliqueStatus.READY and clique.clique:
            self._known_clique = clique.clique
        elif self._node is not None and self._node.metadata.labels.get(CLIQUE_LABEL):
            self._known_clique = self._node.metadata.labels[CLIQUE_LABEL]
        return self._known_clique

    # -- events -------------------------------------------------------------------------------

    def _clique(self) -> str:
        clique = self.observations.clique
        if clique is not None and clique.status is CliqueStatus.READY and clique.clique:
            return clique.clique
        return self._node.metadata.labels.get(CLIQUE_LABEL, "") if self._node else ""

    def _gpu_uuids(self, gpus: Iterable[int | None]) -> tuple[str, ...]:
        known = sorted({gpu for gpu in gpus if gpu is not None and gpu in self._uuids})
        return tuple(self._uuids[gpu] for gpu in known)

    async def _announce(self, step: Step, *, now: float) -> None:
        """Publish the step's fault events, those the rate limit lets through."""
        if step.started:
            self.metrics.episodes.inc()
        published: list[Fault] = []
        for index, fault in enumerate(step.announce):
            # The fault that made the taint stronger always goes out: it is the one readers act on.
            if (step.escalated and index == 0) or self._bucket.take(now):
                published.append(fault)
            else:
                self.metrics.fault_events.labels("suppressed").inc()
        if not published and not step.started:
            return
        # A new episode's span is the root of the fault's trace; later announcements of the
        # same episode are its children.
        with self._fault_span("health fault", None if step.started else self._fault_trace) as span:
            if step.started and span is not None:
                self._fault_trace = annotations_for(span, key=FAULT_TRACE_CONTEXT_ANNOTATION).get(
                    FAULT_TRACE_CONTEXT_ANNOTATION
                )
            await self._publish_faults(published)
        self._unrecorded = [*self._unrecorded, *published][-_MAX_UNRECORDED:]

    async def _recovered(self) -> None:
        episode, self._recovery = self._recovery, None
        parent, self._recovery_trace = self._recovery_trace, None
        if episode is not None:
            with self._fault_span("health recovered", parent):
                await self._publish_recovered(episode)
            self._recovery_unrecorded = True

    @contextlib.contextmanager
    def _fault_span(self, name: str, parent: str | None) -> Iterator[Span | None]:
        """A span of the fault's trace: a child of ``parent``, or a new root when None."""
        if self._tracer is None:
            yield None
            return
        context = context_from_annotations(
            {FAULT_TRACE_CONTEXT_ANNOTATION: parent or ""}, key=FAULT_TRACE_CONTEXT_ANNOTATION
        )
        with self._tracer.start_as_current_span(
            name, context=context or Context(), attributes={"cdo.node": self.node_name}
        ) as span:
            yield span

    def _annotations(self) -> dict[str, str | None] | None:
        """The fault's trace context the Node should carry: only while an episode is open and
        spans are exported (with tracing off the Node is written as it always was)."""
        if not exports(self._tracer):
            return None
        return {FAULT_TRACE_CONTEXT_ANNOTATION: self._fault_trace if self.episode.open else None}

    async def _publish_faults(self, faults: list[Fault]) -> None:
        clique = self._clique()
        for fault in faults:
            log.warning(
                "node fault",
                extra={
                    "node": self.node_name,
                    "rule": fault.rule,
                    "severity": fault.severity.value,
                    "action": fault.action.value,
                    "fault": fault.message,
                },
            )
            event = NodeFault(
                node=self.node_name,
                clique=clique,
                gpus=self._gpu_uuids([fault.gpu]),
                signal=fault.signal,
                code=fault.code,
                severity=fault.severity.value,
                action=fault.action.value,
                message=fault.message,
            )
            if await self._publish(event):
                self.metrics.fault_events.labels("published").inc()

    async def _publish_recovered(self, episode: Episode) -> None:
        self.metrics.recoveries.inc()
        message = (
            f"no GPU, NVLink or fabric fault for {self._settings.hold_down_s:g}s; "
            f"cleared: {', '.join(sorted(episode.signals)) or 'none'}"
        )
        log.info("node recovered", extra={"node": self.node_name, "recovery": message})
        await self._publish(
            NodeRecovered(
                node=self.node_name,
                clique=self._clique(),
                gpus=self._gpu_uuids(episode.gpus),
                signals=tuple(sorted(episode.signals)),
                message=message,
            )
        )

    async def _publish(self, event: Event) -> bool:
        try:
            await self._publisher.publish(event)
        except Exception as exc:  # the Node carries the same facts; an event is best effort
            self.metrics.errors.labels("health-events").inc()
            log.warning("could not publish", extra={"node": self.node_name, "error": repr(exc)})
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
                type_="Warning" if fault.reaction > Reaction.NONE else "Normal",
                reason="GpuFault",
                message=f"{fault.severity.value}, {fault.action.value}: {fault.message}",
            )
        if recovered:
            await self._recorder.record(
                NODES,
                node,
                type_="Normal",
                reason="GpuRecovered",
                message=f"no GPU fault for {self._settings.hold_down_s:g}s",
            )
