"""The scheduler process: informers in, decisions out, bindings and status writes to the API.

    scheduler = Scheduler(client, settings=SchedulerSettings(), metrics=Metrics(),
                          device_taints=DeviceTaintSupport.of(release))  # default: newest
    async with asyncio.TaskGroup() as tasks:
        tasks.create_task(scheduler.run())       # until cancelled
        await scheduler.wait_ready()             # informers listed, scheduling started

Flow, per pending pod (``spec.nodeName`` empty, no scheduling gates, our ``schedulerName``):

1. The pods informer queues its key (on add, and whenever its spec, labels or claim statuses
   change; gated pods wait for the update that removes their last gate).
2. A worker takes the key and decides synchronously (:func:`~sim.scheduler.algorithm.schedule_pod`
   over :class:`~sim.scheduler.state.ClusterState`). Deciding never awaits, so decisions are
   serial even with many workers; only the writes that follow run concurrently.
3. Schedulable: the pod and its claim allocations are *assumed* in the state at once, then the
   claims' status (allocation, reservedFor) is written, then the pod is bound. A failed write
   withdraws the assumptions (and undoes claim reservations already written) and the key is
   retried with backoff.
4. A pod whose claims are not all created yet is not tried (kube-scheduler's DRA PreEnqueue): it
   waits without a status or a backoff and is queued the moment a claim (or its claim status)
   appears.
5. Unschedulable: ``PodScheduled=False``, reason ``Unschedulable``, with the message (only when it
   changed). The pod is parked; a cluster change of a kind that could help it (see
   :data:`~sim.scheduler.state.Kind`) queues it again after its backoff (1 s doubling to 10 s by
   default), and every parked pod is looked at again after ``unschedulable_flush_s`` regardless.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

import msgspec
from msgspec import Meta

from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.informer import Informer, InformerSettings
from shared.kube.keys import ObjectKey
from shared.kube.meta import KubeObject
from shared.kube.models import DeviceTaintRule, Node
from shared.kube.ratelimit import RateLimitSettings
from shared.kube.reconcile import ReconcileRunner, Result, RunnerSettings
from shared.kube.resources import (
    DEVICE_CLASSES,
    NAMESPACES,
    NODES,
    PODS,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    Resource,
)
from shared.kube.workqueue import WorkQueue
from shared.metrics import Metrics
from shared.settings import Settings
from sim.release import DeviceTaintSupport
from sim.scheduler.algorithm import Placement, Unschedulable, claim_not_created, schedule_pod
from sim.scheduler.cel import SelectorCache
from sim.scheduler.dra import ClaimAllocation
from sim.scheduler.facts import PodFacts, pod_facts
from sim.scheduler.objects import (
    DeviceClass,
    Namespace,
    Pod,
    ResourceClaim,
    ResourceSlice,
)
from sim.scheduler.state import ClusterState, Kind
from sim.scheduler.writes import (
    BINDING,
    PRE_BIND_DRA,
    SCHEDULER_ERROR_REASON,
    UNSCHEDULABLE_REASON,
    binding,
    claim_release_patch,
    claim_status_patch,
    not_scheduled_patch,
    reserved,
)

log = logging.getLogger("cdo.sim.scheduler")
T = TypeVar("T", bound=KubeObject)
_CLAIM_DECODER = msgspec.json.Decoder(ResourceClaim)


class SchedulerSettings(Settings, frozen=True, kw_only=True):
    """How the simulated scheduler runs."""

    scheduler_name: Annotated[
        str, Meta(description="Pods with this spec.schedulerName are scheduled.")
    ] = "default-scheduler"
    workers: Annotated[
        int, Meta(description="Pods whose writes (claims, binding) run concurrently.", ge=1)
    ] = 16
    backoff_initial_s: Annotated[
        float, Meta(description="Wait before an unschedulable pod is tried again.", gt=0)
    ] = 1.0
    backoff_max_s: Annotated[
        float, Meta(description="Longest wait between tries of an unschedulable pod.", gt=0)
    ] = 10.0
    unschedulable_flush_s: Annotated[
        float,
        Meta(description="Try an unschedulable pod again after this long without an event.", gt=0),
    ] = 60.0
    write_retry: RateLimitSettings = RateLimitSettings(backoff_base_s=0.05, backoff_max_s=10.0)
    informer: InformerSettings = InformerSettings()


@dataclass
class SchedulerStats:
    """Counts since start, for tests, benchmarks and logs."""

    scheduled: int = 0
    unschedulable_attempts: int = 0
    bind_failures: int = 0
    claims_allocated: int = 0


@dataclass
class _Parked:
    """An unschedulable pod: what failed, how often in a row, and whether it is queued again."""

    kinds: frozenset[Kind]
    attempts: int
    last_try: float
    queued: bool = False
    awaits: _AwaitedClaims | None = None
    """Set while it waits for its claims to be created instead of for a change of ``kinds``."""


@dataclass(frozen=True)
class _AwaitedClaims:
    """The claims a pod not yet tried waits for: those it names, and its template claims."""

    namespace: str
    pod_uid: str
    names: frozenset[str]

    def met_by(self, claim: ResourceClaim) -> bool:
        """Whether ``claim`` may be one of them (kube-scheduler's queueing hint on claims)."""
        meta = claim.metadata
        return meta.namespace == self.namespace and (
            meta.name in self.names or any(o.uid == self.pod_uid for o in meta.owner_references)
        )


def _needs_scheduling(pod: Pod, scheduler_name: str) -> bool:
    return (
        not pod.spec.node_name
        and not pod.spec.scheduling_gates
        and pod.spec.scheduler_name == scheduler_name
        and pod.metadata.deletion_timestamp is None
        and not pod.terminal
    )


def _scheduling_inputs_changed(old: Pod, new: Pod) -> bool:
    return (
        old.spec != new.spec
        or old.metadata.labels != new.metadata.labels
        or old.status.resource_claim_statuses != new.status.resource_claim_statuses
    )


class Scheduler:
    """See the module docstring."""

    def __init__(
        self,
        client: KubeClient,
        *,
        settings: SchedulerSettings | None = None,
        metrics: Metrics | None = None,
        device_taints: DeviceTaintSupport | None = None,
    ) -> None:
        self._client = client
        self.settings = settings or SchedulerSettings()
        metrics = metrics or Metrics()
        self.device_taints = device_taints or DeviceTaintSupport()
        """What the simulated release does with device taints (:mod:`sim.release`)."""
        self.state = ClusterState(honour_device_taints=self.device_taints.taints)
        self.stats = SchedulerStats()
        self._selectors = SelectorCache()
        self._parked: dict[ObjectKey, _Parked] = {}
        self._ready = asyncio.Event()
        informer_settings = self.settings.informer

        def informer(resource: Resource, kind: type[T]) -> Informer[T]:
            return Informer(client, resource, kind, settings=informer_settings, metrics=metrics)

        self.pods = informer(PODS, Pod)
        self.nodes = informer(NODES, Node)
        self.namespaces = informer(NAMESPACES, Namespace)
        self.claims = informer(RESOURCE_CLAIMS, ResourceClaim)
        self.slices = informer(RESOURCE_SLICES, ResourceSlice)
        self.classes = informer(DEVICE_CLASSES, DeviceClass)
        rules = self.device_taints.rules
        self.taint_rules = informer(rules, DeviceTaintRule) if rules is not None else None
        self.queue: WorkQueue[ObjectKey] = WorkQueue(
            name="scheduler", metrics=metrics, rate_limit=self.settings.write_retry
        )
        self._runner = ReconcileRunner(
            name="scheduler",
            queue=self.queue,
            reconcile=self._schedule,
            metrics=metrics,
            settings=RunnerSettings(workers=self.settings.workers, reconcile_timeout_s=30.0),
        )
        self.pods.add_handler(self._on_pod)
        self.nodes.add_handler(
            self._handler(self.state.set_node, lambda n: self.state.delete_node(n.metadata.name))
        )
        self.namespaces.add_handler(
            self._handler(
                self.state.set_namespace, lambda n: self.state.delete_namespace(n.metadata.name)
            )
        )
        self.claims.add_handler(self._on_claim)
        self.slices.add_handler(
            self._handler(self.state.set_slice, lambda s: self.state.delete_slice(s.metadata.name))
        )
        self.classes.add_handler(
            self._handler(
                self.state.set_device_class,
                lambda c: self.state.delete_device_class(c.metadata.name),
            )
        )
        if self.taint_rules is not None:
            self.taint_rules.add_handler(
                self._handler(
                    self.state.set_taint_rule,
                    lambda r: self.state.delete_taint_rule(r.metadata.name),
                )
            )

    # -- running -------------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    async def wait_ready(self) -> None:
        await self._ready.wait()

    @property
    def unschedulable_pods(self) -> int:
        """Pods whose last attempt found no node, or that wait for their claims to be created
        (they wait for a change that may help)."""
        return len(self._parked)

    async def run(self) -> None:
        """List and watch, then schedule until cancelled."""
        informers: list[Informer[Any]] = [
            self.nodes,
            self.namespaces,
            self.classes,
            *([self.taint_rules] if self.taint_rules is not None else []),
            self.slices,
            self.claims,
            self.pods,
        ]
        async with asyncio.TaskGroup() as tasks:
            for each in informers:
                tasks.create_task(each.run(), name=f"scheduler informer {each.resource.plural}")
            for each in informers:
                await each.wait_synced()
            tasks.create_task(self._runner.run(), name="scheduler workers")
            self._ready.set()
            log.info("scheduler started", extra={"nodes": len(self.nodes.cache)})

    # -- events --------------------------------------------------------------------------------

    def _handler(
        self,
        on_set: Callable[[T], frozenset[Kind]],
        on_delete: Callable[[T], frozenset[Kind]],
    ) -> Callable[[T | None, T | None], None]:
        def handle(old: T | None, new: T | None) -> None:
            if new is not None:
                self._wake(on_set(new))
            elif old is not None:
                self._wake(on_delete(old))

        return handle

    def _on_pod(self, old: Pod | None, new: Pod | None) -> None:
        if new is None:
            if old is not None:
                self._parked.pop(ObjectKey.parse(old.key), None)
                self._wake(self.state.delete_pod(old.key))
            return
        self._wake(self.state.observe_pod(new))
        key = ObjectKey.parse(new.key)
        if not _needs_scheduling(new, self.settings.scheduler_name):
            self._parked.pop(key, None)
            return
        if old is None or _scheduling_inputs_changed(old, new):
            self._parked.pop(key, None)
            self.queue.add(key)

    def _on_claim(self, old: ResourceClaim | None, new: ResourceClaim | None) -> None:
        if new is None:
            if old is not None:
                self._wake(self.state.delete_claim(old.key))
            return
        self._wake(self.state.set_claim(new))
        for key, parked in self._parked.items():
            if parked.awaits is not None and not parked.queued and parked.awaits.met_by(new):
                parked.queued = True
                self.queue.add(key)

    def _backoff(self, attempts: int) -> float:
        settings = self.settings
        delay: float = settings.backoff_initial_s * 2.0 ** max(0, attempts - 1)
        return min(settings.backoff_max_s, delay)

    def _wake(self, kinds: frozenset[Kind]) -> None:
        """Queue the parked pods a change of ``kinds`` could help, once their backoff is over."""
        if not kinds or not self._parked:
            return
        now = self.queue.clock.now()
        for key, parked in self._parked.items():
            if not parked.queued and parked.kinds & kinds:
                parked.queued = True  # stays parked, so its attempts keep counting
                self.queue.add_after(key, parked.last_try + self._backoff(parked.attempts) - now)

    # -- one pod -------------------------------------------------------------------------------

    async def _schedule(self, key: ObjectKey) -> Result:
        pod = self.pods.cache.get(str(key))
        if pod is None or not _needs_scheduling(pod, self.settings.scheduler_name):
            self._parked.pop(key, None)
            return Result()
        if self.state.is_assumed(pod.key):
            return Result()  # bound a moment ago; the informer has not caught up
        facts = pod_facts(pod)
        if claim_not_created(facts, self.state) is not None:
            # Not an attempt: no status and no backoff; only the claim's arrival (or a change
            # of the pod's claim statuses) queues it again.
            previous = self._parked.get(key)
            self._parked[key] = _Parked(
                kinds=frozenset(),
                attempts=previous.attempts if previous is not None else 0,
                last_try=self.queue.clock.now(),
                awaits=_AwaitedClaims(
                    namespace=facts.namespace,
                    pod_uid=facts.uid,
                    names=frozenset(ref.claim_name for ref in facts.claims if ref.claim_name),
                ),
            )
            return Result(requeue_after=self.settings.unschedulable_flush_s)
        decision = schedule_pod(facts, self.state, cache=self._selectors)
        if isinstance(decision, Unschedulable):
            return await self._park(key, pod, decision)
        self._parked.pop(key, None)
        await self._commit(facts, decision)
        return Result()

    async def _park(self, key: ObjectKey, pod: Pod, decision: Unschedulable) -> Result:
        previous = self._parked.get(key)
        self._parked[key] = _Parked(
            kinds=decision.kinds,
            attempts=(previous.attempts if previous is not None else 0) + 1,
            last_try=self.queue.clock.now(),
        )
        self.stats.unschedulable_attempts += 1
        condition = pod.condition("PodScheduled")
        if (
            condition is None
            or condition.status != "False"
            or condition.reason != UNSCHEDULABLE_REASON
            or condition.message != decision.message
        ):
            log.info("pod unschedulable", extra={"pod": pod.key, "why": decision.message})
            await self._record_condition(
                pod.metadata.namespace, pod.metadata.name, UNSCHEDULABLE_REASON, decision.message
            )
        return Result(requeue_after=self.settings.unschedulable_flush_s)

    async def _record_condition(self, namespace: str, name: str, reason: str, message: str) -> None:
        """``PodScheduled=False`` with why (best effort: the next attempt records it again)."""
        try:
            await self._client.patch(
                PODS,
                name,
                not_scheduled_patch(reason, message, now=datetime.now(UTC)),
                namespace=namespace,
                subresource="status",
                patch_type="strategic",
            )
        except KubeApiError as exc:
            if not exc.not_found:
                log.warning(
                    "could not record why a pod is not scheduled",
                    extra={"pod": f"{namespace}/{name}", "error": str(exc)},
                )

    async def _commit(self, pod: PodFacts, placement: Placement) -> None:
        """Assume, write the claims, bind; undo the assumptions if any write fails."""
        self.state.assume_pod(pod.with_node(placement.node))
        pending: list[tuple[ClaimAllocation, ResourceClaim]] = []
        for allocation in placement.claims:
            updated = reserved(allocation.claim, pod, allocation.allocation)
            if updated != allocation.claim:
                self.state.assume_claim(updated)
                pending.append((allocation, updated))
        written: list[tuple[ClaimAllocation, ResourceClaim]] = []
        try:
            for allocation, updated in pending:
                body = claim_status_patch(
                    updated, base_version=allocation.claim.metadata.resource_version
                )
                answer = _CLAIM_DECODER.decode(
                    await self._client.patch(
                        RESOURCE_CLAIMS,
                        updated.metadata.name,
                        body,
                        namespace=updated.metadata.namespace,
                        subresource="status",
                    )
                )
                self.state.claim_written(answer)
                written.append((allocation, answer))
            await self._client.request(
                "POST",
                PODS.path(namespace=pod.namespace, name=pod.name, subresource="binding"),
                body=binding(pod, placement.node),
            )
        except asyncio.CancelledError:
            self._forget(pod, pending)
            raise
        except Exception as exc:
            self._forget(pod, pending)
            await self._release(pod, written)
            if isinstance(exc, KubeApiError) and exc.not_found:
                return  # the pod (or a claim) is gone; its deletion event says the rest
            if isinstance(exc, KubeApiError):
                # kube-scheduler: an error after the decision (a PreBind plugin's write, the
                # binding) is the pod's condition, reason SchedulerError, and it is retried.
                stage = BINDING if len(written) == len(pending) else PRE_BIND_DRA
                await self._record_condition(
                    pod.namespace, pod.name, SCHEDULER_ERROR_REASON, f"{stage}: {exc.message}"
                )
            raise
        self.stats.scheduled += 1
        self.stats.claims_allocated += sum(1 for a, _ in written if a.allocation is not None)
        log.debug("pod bound", extra={"pod": pod.key, "node": placement.node})

    def _forget(self, pod: PodFacts, pending: list[tuple[ClaimAllocation, ResourceClaim]]) -> None:
        self.stats.bind_failures += 1
        self.state.forget_pod(pod.key)
        for _, updated in pending:
            self.state.forget_claim(updated.key)

    async def _release(
        self, pod: PodFacts, written: list[tuple[ClaimAllocation, ResourceClaim]]
    ) -> None:
        """Undo the claim writes of a cycle whose binding failed (best effort: a claim left
        reserved for a pod that never runs is what the resource-claim controller cleans up)."""
        for allocation, claim in written:
            body = claim_release_patch(
                claim, pod_uid=pod.uid, deallocate=allocation.allocation is not None
            )
            if body is None:
                continue
            try:
                await self._client.patch(
                    RESOURCE_CLAIMS,
                    claim.metadata.name,
                    body,
                    namespace=claim.metadata.namespace,
                    subresource="status",
                )
            except KubeApiError as exc:
                log.warning(
                    "could not undo a claim reservation",
                    extra={"claim": claim.key, "pod": pod.key, "error": str(exc)},
                )
