"""The reconcile of one domain: read the caches, plan (``plan.py``), apply the plan.

Decisions are taken one at a time, under one lock: the plan reads the cluster view, the
Placement is written, and the view advances, before the next domain decides. Two domains can
therefore never be given the same GPUs, whatever the number of workers. Pod writes (pins, gate
removal, conditions) happen after the lock is released, in parallel; the record already names
every pod's node, so a crash between the two only leaves pods that the next reconcile pins to
the same nodes.

A domain that waits for capacity is remembered; whenever capacity may have grown (a Placement
shrank or went away, a node recovered, a pod outside the records ended) every waiting domain is
queued again, oldest domain first.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Tracer

from services.clique_allocator.caches import Caches
from services.clique_allocator.gang import (
    JOB_KIND,
    GangSize,
    UndeclaredSize,
    UnknownSize,
    gang_size,
    less_channel_only,
)
from services.clique_allocator.gpuapis import (
    apis_needed,
    channel_only_test,
    gpu_counter,
    pod_asks,
    restrict,
)
from services.clique_allocator.metrics import AllocatorMetrics
from services.clique_allocator.objects import controller_of, finished
from services.clique_allocator.placement import ClusterView, NodeLimits
from services.clique_allocator.plan import PLACED, LimitsOf, plan_domain
from services.clique_allocator.plan_units import plan_units
from services.clique_allocator.planning.channelonly import ChannelRoom
from services.clique_allocator.planning.hold import Hold
from services.clique_allocator.planning.nextlook import next_look_s
from services.clique_allocator.planning.outcome import Pin, Plan
from services.clique_allocator.planning.unitrecords import unit_specs
from services.clique_allocator.ranks import pod_rank
from services.clique_allocator.records import owned_by
from services.clique_allocator.state import ClusterState
from services.clique_allocator.tracecontext import story
from services.clique_allocator.units import has_units, in_domain, split_units, unit_asks
from services.clique_allocator.writes import AllocatorWrites
from shared.crds.computedomain import ComputeDomain
from shared.crds.definitions import COMPUTE_DOMAINS
from shared.crds.placement import Placement, PlacementSpec
from shared.kube.errors import KubeApiError
from shared.kube.keys import ObjectKey
from shared.kube.models import Pod
from shared.kube.ownwrites import OwnWrites
from shared.kube.reconcile import Result
from shared.kube.recorder import EventRecorder
from shared.sightings import Sightings
from shared.tracing import exports
from shared.tracing.story import node_faults, story_annotations, story_parent, story_patch

log = logging.getLogger("cdo.clique_allocator")

HELD_KEPT = 100_000


class StaleRecordError(Exception):
    """The Placement changed under us (someone else wrote it): decide again from fresh state."""


class AllocatorReconciler:
    """Reconciles domains by key; only the leader runs it."""

    def __init__(
        self,
        *,
        caches: Caches,
        state: ClusterState,
        book: OwnWrites[Placement],
        writes: AllocatorWrites,
        recorder: EventRecorder,
        metrics: AllocatorMetrics,
        tracer: Tracer,
        on_capacity_change: Callable[[], None],
        pod_writes: int = 16,
        resync_s: float = 0.0,
        retry_waiting_s: float = 0.0,
    ) -> None:
        self._caches = caches
        self._state = state
        self._book = book
        self._writes = writes
        self._recorder = recorder
        self._metrics = metrics
        self._tracer = tracer
        self._on_capacity_change = on_capacity_change
        self._pod_writes = asyncio.Semaphore(pod_writes)
        self._resync_s = resync_s
        self._retry_waiting_s = retry_waiting_s
        self._lock = asyncio.Lock()
        self._held: dict[str, None] = {}
        """Uids of pods this allocator held (condition Placed=False) and has not pinned since,
        oldest first (at most ``HELD_KEPT``): a pin writes Placed=True for them even when the
        cache does not show the hold yet."""
        self._stuck: Sightings[tuple[str, int, datetime]] = Sightings()
        """Stuck slices by (engine key, index, waitingSince): how long this replica has seen
        each wait, the failover grace's clock (planning/failover.py)."""
        self.waiting: set[ObjectKey] = set()
        self.wake_waiting: Callable[[], None] = lambda: None
        """Set by the owner: queue every waiting domain again."""
        self.wakes = 0
        """How many times capacity may have grown (the owner counts its ``wake_waiting``): a
        domain that decided to wait is decided again at once when a wake came while it was
        deciding, since that wake queued only the domains already waiting."""

    async def reconcile(self, key: ObjectKey) -> Result:
        attributes = {"cdo.domain.namespace": key.namespace, "cdo.domain.name": key.name}
        domain = self._caches.domain(key)
        # Trace annotations are read and copied only while spans are exported: with tracing
        # off the allocator does exactly what it did without them.
        traced = exports(self._tracer)
        parent, links = self._story(key, domain) if traced and domain is not None else (None, [])
        with self._tracer.start_as_current_span(
            "reconcile Placement", context=parent, links=links, attributes=attributes
        ):
            return await self._reconcile(key, domain, traced=traced)

    def _story(self, key: ObjectKey, domain: ComputeDomain) -> tuple[Context | None, list[Link]]:
        """The parent and links of this reconcile's span (see ``tracecontext.py``)."""
        text = str(key)
        placement = self._book.current(text, self._caches.placements.cache.get(text))
        names = set(placement.spec.nodes) if placement else set()
        pods = self._caches.pods_using(key.namespace, domain.template_name)
        names.update(pod.spec.node_name for pod in pods if pod.spec.node_name)
        nodes = self._caches.nodes.cache
        faults = node_faults(nodes.get(name) for name in sorted(names))
        return story_parent(story(domain.metadata.annotations, faults))

    async def _reconcile(
        self, key: ObjectKey, domain: ComputeDomain | None, *, traced: bool
    ) -> Result:
        text = str(key)
        wakes_seen = self.wakes  # before the pods are read: they may be stale by the decision
        pods = (
            self._caches.pods_using(key.namespace, domain.template_name)
            if domain is not None
            else []
        )
        async with self._lock:
            placement = await self._placement(text, domain)
            started = time.perf_counter()
            plan = self._plan(text, domain, placement.spec if placement is not None else None, pods)
            self._metrics.placement_decision_seconds.observe(time.perf_counter() - started)
            trace.get_current_span().set_attribute("cdo.placement.action", plan.action)
            await self._apply_record(key, domain, placement, plan, traced=traced)
        await self._apply_pods(pods, plan)
        refused = await self._evict(pods, plan)
        if domain is not None:
            for notice in plan.notices:
                await self._recorder.record(
                    COMPUTE_DOMAINS,
                    domain,
                    type_=notice.type,
                    reason=notice.reason,
                    message=notice.message,
                )
        return self._after(key, plan, evictions_refused=refused, woken=self.wakes != wakes_seen)

    def _plan(
        self,
        key: str,
        domain: ComputeDomain | None,
        placement: PlacementSpec | None,
        pods: list[Pod],
    ) -> Plan:
        """The plan for the domain from the caches: in gang units when it has any."""
        live = [pod for pod in pods if not finished(pod)]
        view, gpus_of, channel_only = self._gpu_view(pods)
        now = datetime.now(UTC).replace(microsecond=0)
        without_nvlink = self._state.nodes_without_nvlink()
        if domain is None:
            self._stuck.forget_where(lambda stuck: in_domain(stuck[0], key))

        def waited(engine_key: str, index: int, since: datetime) -> float:
            return self._stuck.age_s((engine_key, index, since))

        def room() -> ChannelRoom:
            return ChannelRoom(free=self._state.free_attachments(), own=self._state.own_pods(key))

        def limits_of(found: Sequence[Pod]) -> LimitsOf:
            unit_live = [pod for pod in found if not finished(pod)]

            def limits(gpus_per_pod: int) -> NodeLimits | None:
                # Pods that take GPUs and pods without are each placed by their own specs.
                chosen = [pod for pod in unit_live if (gpus_of(pod) > 0) == (gpus_per_pod > 0)]
                return self._state.limits(key, chosen, gpus_per_pod)

            return limits

        gang: GangSize | UnknownSize | UndeclaredSize = GangSize(pods=0, source="")
        if domain is not None and not domain.deleting:
            spec = domain.spec.gang
            explicit = spec.size if spec is not None else None
            unit_label = spec.unit_label if spec is not None else None
            units = split_units(live, unit_label=unit_label)
            recorded = unit_specs(placement) if placement is not None else {}
            if has_units(units, recorded):
                asks = unit_asks(
                    units,
                    recorded={
                        unit: part.size + part.channel_only for unit, part in recorded.items()
                    },
                    explicit=explicit,
                    unit_label=unit_label,
                    namespace=domain.metadata.namespace,
                    template=domain.template_name,
                    workload=self._caches.workload,
                    jobset_jobs=self._caches.jobset_jobs,
                    ranks_of=self._ranks,
                )
                return plan_units(
                    key=key, domain=domain, placement=placement, units=asks,
                    unlabelled=units.unlabelled, unknown=units.unknown, view=view, now=now,
                    waited=waited, nodes_without_nvlink=without_nvlink, gpus_of=gpus_of,
                    limits=limits_of, channel_only=channel_only, room=room,
                )  # fmt: skip
            gang = self._gpu_gang(domain, live, explicit, gpus_of, channel_only)
        return plan_domain(
            key=key,
            domain=domain,
            placement=placement,
            pods=pods,
            gang=gang,
            view=view,
            ranks=self._ranks(pods),
            now=now,
            waited=waited,
            nodes_without_nvlink=without_nvlink,
            gpus_of=gpus_of,
            limits=limits_of(pods),
            channel_only=channel_only,
            room=room,
        )

    def _gpu_gang(
        self,
        domain: ComputeDomain,
        live: Sequence[Pod],
        explicit: int | None,
        gpus_of: Callable[[Pod], int],
        channel_only: Callable[[Pod], bool],
    ) -> GangSize | UnknownSize | UndeclaredSize:
        """The size of the gang of pods that take GPUs (``gang.py``): ``spec.gang.size`` less
        the live pods without GPUs, else what the workloads of the pods with GPUs want (a
        JobSet without its Jobs whose pods take none)."""
        without = [pod for pod in live if gpus_of(pod) == 0 and channel_only(pod)]
        if explicit is not None:
            return less_channel_only(GangSize(pods=explicit, source="spec.gang.size"), len(without))
        skip = frozenset(
            owner.uid
            for pod in without
            if (owner := controller_of(pod)) is not None and owner.kind == JOB_KIND
        )
        return gang_size(
            explicit=None,
            pods=[pod for pod in live if gpus_of(pod) > 0],
            workload=self._caches.workload,
            template=domain.template_name,
            jobset_jobs=self._caches.jobset_jobs,
            skip_jobs=skip,
        )

    def _gpu_view(
        self, pods: list[Pod]
    ) -> tuple[ClusterView, Callable[[Pod], int], Callable[[Pod], bool]]:
        """The view the domain is placed in (nodes that serve the ways its pods ask for GPUs),
        the GPUs each of its pods asks for, and whether a pod asks for none at all
        (``gpuapis.py``)."""
        view = self._state.view()
        asks = pod_asks((pod for pod in pods if not finished(pod)), self._caches.claim_spec)
        needed = apis_needed(asks.values())
        restricted = restrict(view, self._state.facts(), needed)
        return restricted, gpu_counter(asks, view), channel_only_test(asks)

    def _ranks(self, pods: Sequence[Pod]) -> dict[str, int]:
        """The ranks of the pods that carry an index (``ranks.py``)."""

        def parallelism(namespace: str, job: str) -> int | None:
            found = self._caches.workload(JOB_KIND, namespace, job)
            if found is None:
                return None
            return 1 if found.spec.parallelism is None else found.spec.parallelism

        found = {pod.metadata.name: pod_rank(pod, parallelism=parallelism) for pod in pods}
        return {name: rank for name, rank in found.items() if rank is not None}

    async def _placement(self, key: str, domain: ComputeDomain | None) -> Placement | None:
        """The domain's Placement through the book; one left by an earlier domain of the same
        name is deleted first (it holds capacity no live domain uses)."""
        placement = self._book.current(key, self._caches.placements.cache.get(key))
        if placement is None or domain is None or owned_by(placement, domain):
            return placement
        meta = placement.metadata
        await self._writes.delete_placement(namespace=meta.namespace, name=meta.name, uid=meta.uid)
        self._book.deleted(key, uid=meta.uid)
        self._state.advance(key, ())
        self._on_capacity_change()
        self.wake_waiting()
        return None

    async def _apply_record(
        self,
        key: ObjectKey,
        domain: ComputeDomain | None,
        placement: Placement | None,
        plan: Plan,
        *,
        traced: bool,
    ) -> None:
        text = str(key)
        copies = story_annotations(domain.metadata.annotations) if traced and domain else None
        if plan.action == "delete" and placement is not None:
            meta = placement.metadata
            await self._writes.delete_placement(
                namespace=meta.namespace, name=meta.name, uid=meta.uid
            )
            self._book.deleted(text, uid=meta.uid)
            self._state.advance(text, ())
            log.info("placement deleted", extra={"domain": text})
        elif plan.action == "write" and domain is not None and plan.record is not None:
            try:
                if placement is None:
                    written = await self._writes.create_placement(
                        domain, plan.record, annotations=copies
                    )
                else:
                    written = await self._writes.replace_placement(
                        domain,
                        plan.record,
                        resource_version=placement.metadata.resource_version,
                        annotations=copies,
                    )
            except KubeApiError as exc:
                if not (exc.conflict or exc.already_exists or exc.not_found):
                    raise
                fresh = await self._writes.get_placement(namespace=key.namespace, name=key.name)
                self._book.adopt(text, fresh)
                self._state.invalidate()
                raise StaleRecordError(f"placement {text} changed under us: {exc}") from exc
            self._book.wrote(written)
            self._state.advance(text, plan.reservations)
        elif plan.action == "keep" and domain is not None and placement is not None:
            wanted = story_annotations(domain.metadata.annotations)
            changes = story_patch(placement.metadata.annotations, wanted) if traced else {}
            # A record without this allocator's stamp (written before it, or by someone else
            # while the policy was not in place) gives no channel until it is written again.
            if changes or not self._writes.stamped(placement):
                self._book.wrote(await self._writes.annotate_placement(placement, changes))
        result = "Recorded" if plan.action == "write" else "Unchanged"
        if plan.waiting:
            result = next((hold.reason for hold in plan.holds), "Waiting")
        if plan.action != "keep" or plan.waiting:
            self._metrics.placement_decisions.labels(result).inc()
        if plan.action != "keep":
            self._on_capacity_change()

    async def _apply_pods(self, found: list[Pod], plan: Plan) -> None:
        if not plan.pins and not plan.holds:
            return
        pods = {pod.metadata.name: pod for pod in found}

        async def pin(item: Pin) -> None:
            pod = pods.get(item.pod)
            if pod is None:
                return
            # The hold this allocator wrote may not be in the cache yet: it counts as waited.
            waited = item.waited or pod.metadata.uid in self._held
            async with self._pod_writes:
                if await self._writes.pin(pod, item.node) and waited:
                    self._held.pop(pod.metadata.uid, None)
                    await self._writes.set_condition(
                        pod,
                        status="True",
                        reason=PLACED,
                        message=f"pinned to node {item.node}"
                        if item.node
                        else "released to the scheduler: the domain runs without IMEX",
                    )

        async def hold(item: Hold) -> None:
            pod = pods.get(item.pod)
            if pod is None:
                return
            async with self._pod_writes:
                await self._writes.set_condition(
                    pod, status="False", reason=item.reason, message=item.message
                )
                self._held[pod.metadata.uid] = None
                if len(self._held) > HELD_KEPT:  # pods deleted while held are never pinned
                    del self._held[next(iter(self._held))]

        async with asyncio.TaskGroup() as group:
            for item in plan.pins:
                group.create_task(pin(item))
            for held in plan.holds:
                group.create_task(hold(held))

    async def _evict(self, found: list[Pod], plan: Plan) -> bool:
        """Evict the pods of slices that failed over; True when a budget refused one."""
        pods = {pod.metadata.name: pod for pod in found}
        refused = False
        for name in plan.evictions:
            pod = pods.get(name)
            if pod is None:
                continue
            async with self._pod_writes:
                if not await self._writes.evict(pod):
                    refused = True
                    log.info("eviction refused by a disruption budget", extra={"pod": name})
        return refused

    def _after(
        self, key: ObjectKey, plan: Plan, *, evictions_refused: bool = False, woken: bool = False
    ) -> Result:
        if plan.released:
            self.wake_waiting()
        if plan.waiting:
            self.waiting.add(key)
        else:
            self.waiting.discard(key)
        self._metrics.waiting_gangs.set(len(self.waiting))
        return Result(
            requeue_after=next_look_s(
                plan,
                woken=woken,
                evictions_refused=evictions_refused,
                retry_waiting_s=self._retry_waiting_s,
                resync_s=self._resync_s,
            )
        )
