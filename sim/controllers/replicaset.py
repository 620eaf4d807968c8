"""ReplicaSet controller: keep ``spec.replicas`` pods of the template, report them in status.

Desired state (pure, :func:`plan_replicas` and :func:`replica_set_status`):

- the active pods are the ReplicaSet's pods (controller ownerReference with its uid) that are
  neither finished (``Succeeded``/``Failed``) nor being deleted; a pod that failed or was
  evicted, or that is terminating, no longer counts and is replaced at once;
- pods this controller created or deleted but its cache does not reflect yet count as present
  and gone respectively (see :mod:`sim.controllers.expectations`);
- fewer than wanted: create the difference (at most ``burst`` per reconcile) from the template,
  ``generateName: <replicaset>-``, labels and annotations of the template, ownerReference
  ``controller: true``; more than wanted: delete the difference in :func:`deletion_order`
  (unscheduled, then pending, then not ready, then ready for the shortest time, then newest);
- status: ``replicas`` (active pods), ``fullyLabeledReplicas``, ``readyReplicas``,
  ``availableReplicas`` (ready for ``minReadySeconds``), ``observedGeneration`` and a
  ``ReplicaFailure`` condition while creating or deleting fails.

Finished pods are left in place (the real pod garbage collector removes them past a large
threshold; nothing here does). Orphans matching the selector are not adopted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.keys import ObjectKey
from shared.kube.mapping import map_by_owner, own_key
from shared.kube.models import Pod
from shared.kube.ratelimit import RateLimitSettings
from shared.kube.reconcile import Result
from shared.kube.recorder import EventRecorder
from shared.kube.resources import REPLICA_SETS
from shared.metrics import Metrics
from sim.controllers.expectations import Expectations, Outstanding
from sim.controllers.informers import BY_CONTROLLER, SharedInformers
from sim.controllers.loop import Loop
from sim.controllers.objects import (
    ReplicaSet,
    ReplicaSetStatus,
    WorkloadCondition,
    condition,
    controller_reference,
    remove_condition,
    set_condition,
    status_patch,
)
from sim.controllers.podcontrol import PodControl, PodToCreate
from sim.controllers.pods import (
    deletion_order,
    is_active,
    is_available,
    is_ready,
    labels_match,
    next_availability,
    pod_from_template,
    template_labels,
)


@dataclass(frozen=True)
class ReplicaPlan:
    """Pods to create (how many) and to delete (which) to reach the wanted count."""

    create: int = 0
    delete: tuple[Pod, ...] = ()


def plan_replicas(
    *, replicas: int, pods: Sequence[Pod], outstanding: Outstanding, burst: int
) -> ReplicaPlan:
    """The difference between ``replicas`` and the pods there are (or soon will be)."""
    active = [p for p in pods if is_active(p) and p.metadata.uid not in outstanding.deletes]
    diff = replicas - (len(active) + len(outstanding.creates))
    if diff > 0:
        return ReplicaPlan(create=min(diff, burst))
    if diff < 0:
        count = min(-diff, burst, len(active))
        return ReplicaPlan(delete=tuple(deletion_order(active)[:count]))
    return ReplicaPlan()


def replica_set_status(
    rs: ReplicaSet, pods: Sequence[Pod], *, now: datetime, failure: tuple[str, str] | None
) -> ReplicaSetStatus:
    """The status the pods in the cache justify; ``failure`` is (reason, message) of a failed
    create or delete in this reconcile."""
    active = [p for p in pods if is_active(p)]
    labels = template_labels(rs.spec.template)
    min_ready = rs.spec.min_ready_seconds
    conditions = rs.status.conditions
    if failure is not None:
        if condition(conditions, "ReplicaFailure") is None:
            reason, message = failure
            conditions = set_condition(
                conditions,
                WorkloadCondition(
                    type="ReplicaFailure", status="True", reason=reason, message=message[:1024]
                ),
                now=now,
            )
    else:
        conditions = remove_condition(conditions, "ReplicaFailure")
    return ReplicaSetStatus(
        replicas=len(active),
        fully_labeled_replicas=sum(1 for p in active if labels_match(p.metadata.labels, labels)),
        ready_replicas=sum(1 for p in active if is_ready(p)),
        available_replicas=sum(
            1 for p in active if is_available(p, min_ready_seconds=min_ready, now=now)
        ),
        observed_generation=rs.metadata.generation,
        conditions=conditions,
    )


def pods_for(rs: ReplicaSet, count: int) -> list[PodToCreate]:
    body = pod_from_template(
        rs.spec.template,
        generate_name=f"{rs.metadata.name}-",
        namespace=rs.metadata.namespace,
        owner_reference=controller_reference(REPLICA_SETS, rs),
    )
    return [PodToCreate(body=body) for _ in range(count)]


class ReplicaSetController:
    """Reconciles ReplicaSets; see the module docstring."""

    def __init__(
        self,
        client: KubeClient,
        informers: SharedInformers,
        *,
        metrics: Metrics,
        recorder: EventRecorder | None,
        workers: int,
        burst: int,
        expectations_ttl_s: float,
        rate_limit: RateLimitSettings,
    ) -> None:
        self._client = client
        self._replica_sets = informers.replica_sets
        self._pods = informers.pods
        self._burst = burst
        self._expectations = Expectations(
            cache_version=lambda: self._pods.resource_version, ttl_s=expectations_ttl_s
        )
        self._pod_control = PodControl(
            client,
            owner_resource=REPLICA_SETS,
            expectations=self._expectations,
            recorder=recorder,
        )
        self.loop = Loop(
            name="sim-replicaset",
            reconcile=self.reconcile,
            metrics=metrics,
            workers=workers,
            rate_limit=rate_limit,
        )
        self._replica_sets.add_handler(self.loop.on_change(own_key))
        self._replica_sets.add_handler(self._forget_deleted)
        self._pods.add_handler(
            self.loop.on_change(map_by_owner(group="apps", kind="ReplicaSet", controller_only=True))
        )

    def _forget_deleted(self, old: ReplicaSet | None, new: ReplicaSet | None) -> None:
        if new is None and old is not None:
            self._expectations.forget(old.metadata.uid)

    async def reconcile(self, key: ObjectKey) -> Result:
        rs = self._replica_sets.cache.get(str(key))
        if rs is None:
            return Result()
        pods = self._pods.cache.by_index(BY_CONTROLLER, rs.metadata.uid)
        error: KubeApiError | None = None
        failure: tuple[str, str] | None = None
        if rs.metadata.deletion_timestamp is None:
            outstanding = self._expectations.outstanding(rs.metadata.uid, pods)
            plan = plan_replicas(
                replicas=rs.spec.replicas, pods=pods, outstanding=outstanding, burst=self._burst
            )
            try:
                if plan.create:
                    await self._pod_control.create(rs, pods_for(rs, plan.create))
                if plan.delete:
                    await self._pod_control.delete(rs, plan.delete)
            except KubeApiError as exc:
                error = exc
                failure = ("FailedCreate" if plan.create else "FailedDelete", str(exc))
        now = datetime.now(UTC)
        status = replica_set_status(rs, pods, now=now, failure=failure)
        if status != rs.status:
            try:
                await self._client.patch(
                    REPLICA_SETS,
                    rs.metadata.name,
                    status_patch(status),
                    namespace=rs.metadata.namespace,
                    subresource="status",
                )
            except KubeApiError as exc:
                if not exc.not_found:
                    raise
        if error is not None:
            raise error
        wait = next_availability(
            (p for p in pods if is_active(p)), min_ready_seconds=rs.spec.min_ready_seconds, now=now
        )
        return Result(requeue_after=wait)
