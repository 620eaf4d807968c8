"""The health monitor of one node: the loop over its Node, from observations to the Node's health.

    monitor = HealthMonitor(node_name="gb200-r0-t00", nvml=PynvmlNvml(), client=client,
                            publisher=ctx.bus, metrics=ctx.metrics, settings=settings)
    ctx.readiness.add("nvml", lambda: monitor.nvml_available)
    ctx.supervisor.start("health monitor", monitor.run())

Everything the monitor needs comes in as arguments, so a simulator can run one per simulated
node in one process. :meth:`HealthMonitor.run` runs three tasks until cancelled, in three rooms:

- **NVML** (``watcher``): readings and XID events feed :class:`Observations`; NVML that cannot
  be read is a fault of its own (condition Unknown, a NoSchedule taint).
- **Node**: an informer on the one Node (a field selector), so a change by anyone (a taint
  removed by hand, the node registered again, the circuit breaker's answer to its claim) is
  seen and acted on; what the monitor reads does not grow with the cluster (``fleet``,
  ``breaker``).
- **Reconcile** (here): whenever something changed, or a deadline ends, mark the faults that
  stay on their GPU (``scope``), move the episode on (:func:`state.advance`), hand what it
  announces to the :class:`FaultAnnouncer`, evaluate :func:`state.desired_health` capped by
  the breaker, act on single GPUs (:class:`GpuReactor`: device taints, evictions) and apply
  the rest to the Node (:class:`NodeWriter`). Failed writes are retried with backoff.

Tracing: the announcer keeps the fault's trace (docs/events.md, "One trace per story"); its
context goes on the Node as ``cdo.dev/fault-trace-context`` in the same write as the taint, and
comes off when the episode ends. After a restart the episode and its trace are resumed from the
taint and annotation the Node carries.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable
from datetime import datetime

from opentelemetry.trace import Tracer

from services.health_monitor.announcer import About, FaultAnnouncer, Publisher
from services.health_monitor.classification import DEFAULT_CLASSIFIER, Classifier
from services.health_monitor.faults import Fault
from services.health_monitor.fleet import Fleet
from services.health_monitor.gpureactor import GpuReactor
from services.health_monitor.metrics import HealthMetrics
from services.health_monitor.nodeview import newer, node_informer, node_writer
from services.health_monitor.observations import Observations
from services.health_monitor.rules import Severity
from services.health_monitor.scope import confine
from services.health_monitor.settings import MonitorSettings
from services.health_monitor.state import (
    Episode,
    NodeHealth,
    advance,
    desired_health,
    next_deadline,
    resumed_episode,
    resumed_trace,
)
from services.health_monitor.watcher import NvmlWatcher
from services.health_monitor.writer import WriteBackoff, utc_now
from shared.crds.names import BREAKER_ANNOTATION, CLIQUE_LABEL, GPU_FAULT_TAINT
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.models import Node
from shared.kube.recorder import EventRecorder
from shared.kubeletapi.podresources import PodResourcesClient
from shared.metrics import Metrics
from shared.nvml import CliqueStatus, Nvml

__all__ = ["HealthMonitor", "Publisher"]

log = logging.getLogger("cdo.health_monitor")


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
        pod_resources: PodResourcesClient | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.node_name = node_name
        self._settings = settings
        self._clock = clock
        self._recorder = recorder
        self.metrics = HealthMetrics(metrics)
        self._dirty = asyncio.Event()
        self.observations = Observations(latch_s=settings.xid_latch_s)
        self._watcher = NvmlWatcher(
            node_name=node_name, nvml=nvml, observations=self.observations, classifier=classifier,
            metrics=self.metrics, settings=settings, clock=clock, on_change=self._dirty.set,
        )  # fmt: skip
        self._announcer = FaultAnnouncer(
            node_name=node_name, publisher=publisher, metrics=self.metrics, settings=settings,
            tracer=tracer, recorder=recorder, now=clock(),
        )  # fmt: skip
        self._writer = node_writer(
            client, node_name=node_name, settings=settings, metrics=self.metrics, wall=wall_clock
        )
        self._backoff = WriteBackoff(
            first_s=settings.write_retry_s, max_s=settings.write_retry_max_s
        )
        self._informer = node_informer(
            client, node_name=node_name, settings=settings, metrics=metrics
        )
        self._informer.add_handler(self._on_own_node)
        self._gpus = GpuReactor(
            node_name=node_name, client=client, pod_resources=pod_resources, settings=settings,
            metrics=self.metrics, registry=metrics, on_change=self._dirty.set,
        )  # fmt: skip
        self._fleet = Fleet(
            node_name=node_name,
            settings=settings.breaker,
            metrics=self.metrics,
            wall_clock=wall_clock,
        )
        self._known_clique = ""  # the last clique this node was seen in (breaker scope)
        self.episode = Episode()
        self.health: NodeHealth | None = None  # the last desired health evaluated
        self._node: Node | None = None
        self._adopted = False  # the first Node seen has been checked for an earlier taint

    # -- public state -------------------------------------------------------------------------

    @property
    def nvml_available(self) -> bool:
        """True once NVML answered a whole reading, False while it cannot be read (readiness)."""
        return self._watcher.available

    @property
    def node_synced(self) -> bool:
        return self._informer.synced

    async def run(self) -> None:
        """Watch, read and reconcile until cancelled."""
        async with asyncio.TaskGroup() as group:
            group.create_task(self._informer.run(), name=f"health node informer {self.node_name}")
            group.create_task(self._watcher.run(), name=f"health nvml {self.node_name}")
            group.create_task(self._gpus.run(), name=f"health gpus {self.node_name}")
            group.create_task(self._reconcile_loop(), name=f"health reconcile {self.node_name}")

    # -- the Node -----------------------------------------------------------------------------

    def _on_own_node(self, _old: Node | None, new: Node | None) -> None:
        self._on_node(new)
        self._fleet.observe(new)

    def _on_node(self, new: Node | None) -> None:
        if new is None:
            self._node = None  # deleted: read again (and wait for it) before writing
        else:
            if self._node is None:
                self._backoff.retry_at = None  # the Node is (back) there: no need to wait
            self._adopt(new)
        self._dirty.set()

    def _adopt(self, node: Node) -> None:
        self._node = newer(self._node, node)
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
            self._announcer.resume_trace(resumed_trace(node.metadata.annotations))
            log.info(
                "node already carries the fault taint; keeping it for a hold-down",
                extra={"node": self.node_name, "effect": effect},
            )

    async def _current_node(self, now: float) -> Node | None:
        if self._node is not None:
            return self._node
        if self._backoff.waiting(now):
            return None
        try:
            self._adopt(await self._writer.read())
        except KubeApiError as exc:
            self._write_failed(exc, now=now)
            return None
        return self._node

    def _write_failed(self, exc: KubeApiError, *, now: float) -> None:
        self.metrics.errors.labels("health-node").inc()
        pause = self._backoff.failed(now=now, retry_after_s=exc.retry_after_s)
        log.warning(
            "could not bring the node to its desired health; retrying",
            extra={"node": self.node_name, "error": str(exc), "pause_s": pause},
        )
        self._node = None  # read it again before the next write

    # -- reconcile ----------------------------------------------------------------------------

    async def _reconcile_loop(self) -> None:
        while True:
            await self._wait_for_work()
            self._dirty.clear()
            await self._reconcile()

    async def _wait_for_work(self) -> None:
        now = self._clock()
        deadlines = [
            moment
            for moment in (
                next_deadline(self.episode, now=now, hold_down_s=self._settings.hold_down_s),
                self.observations.next_expiry(),
                self._backoff.retry_at,
                self._breaker_deadline(now),
                self._gpus.deadline(),
            )
            if moment is not None
        ]
        if not deadlines:
            await self._dirty.wait()
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0.0, min(deadlines) - now)):
                await self._dirty.wait()

    def _confined(self, faults: tuple[Fault, ...], node: Node | None) -> tuple[Fault, ...]:
        """``faults`` with those that stay on their GPU marked (``scope``)."""
        enabled = self._gpus.can_confine(node)
        return confine(faults, gpu_count=self.observations.gpu_count, enabled=enabled)

    async def _reconcile(self) -> None:
        now = self._clock()
        seen = self._confined(self.observations.take_seen(now), self._node)
        step = advance(self.episode, faults=seen, now=now, hold_down_s=self._settings.hold_down_s)
        self.episode = step.episode
        await self._announcer.announce(step.announcements, now=now, about=self._about())
        node = await self._current_node(now)
        active = self._confined(self.observations.active(now), node)
        health, breaker = self._desired(node, active, now=now)
        self._observe(health)
        await self._gpus.apply(active, node=node, uuids=self._watcher.uuids, now=now)
        if node is None or self._backoff.waiting(now):
            return
        trace = self._announcer.trace_annotation(episode_open=self.episode.open)
        try:
            written = await self._writer.apply(
                health, node, annotations={**(trace or {}), **breaker} or None
            )
            self._node = newer(self._node, written)
        except KubeApiError as exc:
            self._write_failed(exc, now=now)
            return
        self._backoff.succeeded()
        await self._announcer.node_written(
            self._node, reaction=health.reaction, about=self._about()
        )
        if self._fleet.enabled and self._node is not None:
            await self._fleet.report(self._recorder, self._node, health)

    def _desired(
        self, node: Node | None, faults: tuple[Fault, ...], *, now: float
    ) -> tuple[NodeHealth, dict[str, str | None]]:
        """The health the Node should show, and the breaker's record for its annotations."""
        observations = self.observations
        evaluate = functools.partial(
            desired_health,
            faults=faults,
            clique=observations.clique,
            episode=self.episode,
            now=now,
            hold_down_s=self._settings.hold_down_s,
            nvml_unavailable=observations.unavailable,
        )
        health = evaluate()
        if node is None or not self._fleet.enabled:
            return health, {}
        # The breaker bounds the taint; the condition says when it holds NoExecute back.
        capped = self._fleet.step(health=health, node=node, clique=self._breaker_clique())
        withheld = self._fleet.describe(capped)
        return evaluate(cap=capped.cap, withheld=withheld), {
            BREAKER_ANNOTATION: self._fleet.annotation(capped)
        }

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

    def _ready_clique(self) -> str | None:
        """The clique the GPUs registered in, when they all did."""
        clique = self.observations.clique
        if clique is not None and clique.status is CliqueStatus.READY and clique.clique:
            return clique.clique
        return None

    def _breaker_clique(self) -> str:
        """The clique the breaker counts this node in: the one it is in, or was last seen in
        (a fabric fault takes the label away, not the node out of its clique's count)."""
        ready = self._ready_clique()
        if ready is not None:
            self._known_clique = ready
        elif self._node is not None and self._node.metadata.labels.get(CLIQUE_LABEL):
            self._known_clique = self._node.metadata.labels[CLIQUE_LABEL]
        return self._known_clique

    def _about(self) -> About:
        """Where the events say the node is: its clique as the GPUs or the Node's label say."""
        clique = self._ready_clique()
        if clique is None:
            clique = self._node.metadata.labels.get(CLIQUE_LABEL, "") if self._node else ""
        return About(clique=clique, uuids=self._watcher.uuids)
