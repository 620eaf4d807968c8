"""StatefulSet controller: one pod per ordinal, ``<statefulset>-<ordinal>``, kept and replaced.

Desired state (pure, :func:`plan_stateful_set` and :func:`stateful_set_status`), from the
StatefulSet's pods (controller ownerReference with its uid) in the cache and this controller's
outstanding writes:

- the ordinals wanted are ``ordinals.start`` .. ``ordinals.start + replicas - 1``; each gets the
  pod ``<statefulset>-<ordinal>`` from the template, with the labels
  ``apps.kubernetes.io/pod-index`` (the ordinal), ``statefulset.kubernetes.io/pod-name`` and
  ``controller-revision-hash`` (``<statefulset>-<hash of the template>``), ``hostname`` = the pod's
  name and ``subdomain`` = ``serviceName``;
- a pod that finished (``Failed`` or ``Succeeded``) is deleted and, once gone, made again under the
  same name; a pod being deleted is waited for;
- pods of ordinals past the wanted range are deleted, highest ordinal first;
- ``podManagementPolicy: Parallel`` creates and deletes all at once; ``OrderedReady`` (the default)
  creates one pod at a time, lowest ordinal first, only while every lower pod is Running and Ready,
  and deletes one at a time, highest first, only while the others are Running and Ready;
- status: ``replicas`` (pods present and not finished), ``readyReplicas``, ``availableReplicas``
  (ready for ``minReadySeconds``), ``currentReplicas`` and ``updatedReplicas`` (pods of the current
  template's revision), ``currentRevision``, ``updateRevision`` and ``observedGeneration``.

Pods naming resource claim templates get their claims from the resource-claim controller, as
every pod does; a pod made again under the same name gets new claims (the old ones go with the old
pod). Not simulated: ``volumeClaimTemplates`` (no PersistentVolumeClaims), rolling updates of a
changed template (existing pods keep their revision), ``ControllerRevision`` objects, the
``persistentVolumeClaimRetentionPolicy``, and adoption of orphans.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.keys import ObjectKey
from shared.kube.mapping import map_by_owner, own_key
from shared.kube.models import Pod
from shared.kube.ratelimit import RateLimitSettings
from shared.kube.reconcile import Result
from shared.kube.recorder import EventRecorder
from shared.kube.resources import STATEFUL_SETS
from shared.metrics import Metrics
from sim.controllers.expectations import Expectations, Outstanding
from sim.controllers.informers import BY_CONTROLLER, SharedInformers
from sim.controllers.loop import Loop
from sim.controllers.objects import (
    StatefulSet,
    StatefulSetStatus,
    controller_reference,
    status_patch,
)
from sim.controllers.podcontrol import PodControl, PodToCreate
from sim.controllers.pods import (
    is_available,
    is_ready,
    is_terminal,
    is_terminating,
    next_availability,
    pod_from_template,
)
from sim.controllers.rollout import template_hash

POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
REVISION_LABEL = "controller-revision-hash"
PARALLEL = "Parallel"


def revision(sts: StatefulSet) -> str:
    """The ``controller-revision-hash`` of the StatefulSet's current template."""
    return f"{sts.metadata.name}-{template_hash(sts.spec.template, None)}"


def ordinal_of(sts_name: str, pod: Pod) -> int | None:
    """The ordinal in a pod's name ``<statefulset>-<ordinal>``; None for any other name."""
    prefix = f"{sts_name}-"
    name = pod.metadata.name
    if not name.startswith(prefix):
        return None
    tail = name[len(prefix) :]
    return int(tail) if tail.isdigit() else None


def wanted_ordinals(sts: StatefulSet) -> range:
    start = max(0, sts.spec.ordinals.start)
    return range(start, start + max(0, sts.spec.replicas))


@dataclass(frozen=True)
class StatefulSetPlan:
    """Ordinals to create, pods to delete."""

    create: tuple[int, ...] = ()
    delete: tuple[Pod, ...] = ()


def _healthy(pod: Pod) -> bool:
    return pod.status.phase == "Running" and is_ready(pod) and not is_terminating(pod)


def plan_stateful_set(
    sts: StatefulSet, pods: Sequence[Pod], outstanding: Outstanding
) -> StatefulSetPlan:
    """Where the StatefulSet's pods go next; see the module docstring."""
    name = sts.metadata.name
    by_ordinal: dict[int, Pod] = {}
    strays: list[Pod] = []
    for pod in pods:
        ordinal = ordinal_of(name, pod)
        if ordinal is None or ordinal in by_ordinal:
            strays.append(pod)
        else:
            by_ordinal[ordinal] = pod
    pending = {create.name for create in outstanding.creates}
    wanted = wanted_ordinals(sts)
    parallel = sts.spec.pod_management_policy == PARALLEL

    def gone(pod: Pod) -> bool:
        return pod.metadata.uid in outstanding.deletes or is_terminating(pod)

    create: list[int] = []
    delete: list[Pod] = [p for p in strays if not gone(p)]
    for ordinal in wanted:
        found = by_ordinal.get(ordinal)
        if found is None:
            if f"{name}-{ordinal}" in pending:
                if not parallel:
                    break
                continue
            create.append(ordinal)
            if not parallel:
                break
            continue
        pod = found
        if gone(pod):
            if not parallel:
                break
            continue
        if is_terminal(pod):
            delete.append(pod)
            if not parallel:
                break
            continue
        if not parallel and not _healthy(pod):
            break
    surplus = sorted(
        (o for o in by_ordinal if o not in wanted and not gone(by_ordinal[o])), reverse=True
    )
    if surplus:
        kept_healthy = all(_healthy(by_ordinal[o]) for o in wanted if o in by_ordinal)
        if parallel:
            delete.extend(by_ordinal[o] for o in surplus)
        elif kept_healthy and not any(gone(by_ordinal[o]) for o in by_ordinal):
            delete.append(by_ordinal[surplus[0]])
    return StatefulSetPlan(create=tuple(create), delete=tuple(delete))


def stateful_set_status(
    sts: StatefulSet, pods: Sequence[Pod], *, now: datetime
) -> StatefulSetStatus:
    """The status the pods in the cache justify."""
    present = [p for p in pods if not is_terminal(p) and not is_terminating(p)]
    current = revision(sts)
    of_revision = sum(1 for p in present if p.metadata.labels.get(REVISION_LABEL) == current)
    min_ready = sts.spec.min_ready_seconds
    return StatefulSetStatus(
        observed_generation=sts.metadata.generation,
        replicas=len(present),
        ready_replicas=sum(1 for p in present if is_ready(p)),
        current_replicas=of_revision,
        updated_replicas=of_revision,
        available_replicas=sum(
            1 for p in present if is_available(p, min_ready_seconds=min_ready, now=now)
        ),
        current_revision=current,
        update_revision=current,
    )


def pod_for(sts: StatefulSet, ordinal: int) -> PodToCreate:
    """The pod of one ordinal, named ``<statefulset>-<ordinal>``."""
    name = f"{sts.metadata.name}-{ordinal}"
    body = pod_from_template(
        sts.spec.template,
        generate_name="",
        namespace=sts.metadata.namespace,
        owner_reference=controller_reference(STATEFUL_SETS, sts),
        extra_labels={
            POD_INDEX_LABEL: str(ordinal),
            POD_NAME_LABEL: name,
            REVISION_LABEL: revision(sts),
        },
    )
    metadata: dict[str, Any] = body["metadata"]
    del metadata["generateName"]
    metadata["name"] = name
    spec: dict[str, Any] = body["spec"]
    spec["hostname"] = name
    if sts.spec.service_name:
        spec["subdomain"] = sts.spec.service_name
    return PodToCreate(body=body, tag=str(ordinal))


class StatefulSetController:
    """Reconciles StatefulSets; see the module docstring."""

    def __init__(
        self,
        client: KubeClient,
        informers: SharedInformers,
        *,
        metrics: Metrics,
        recorder: EventRecorder | None,
        workers: int,
        expectations_ttl_s: float,
        rate_limit: RateLimitSettings,
    ) -> None:
        self._client = client
        self._stateful_sets = informers.stateful_sets
        self._pods = informers.pods
        self._expectations = Expectations(
            cache_version=lambda: self._pods.resource_version, ttl_s=expectations_ttl_s
        )
        self._pod_control = PodControl(
            client, owner_resource=STATEFUL_SETS, expectations=self._expectations, recorder=recorder
        )
        self.loop = Loop(
            name="sim-statefulset",
            reconcile=self.reconcile,
            metrics=metrics,
            workers=workers,
            rate_limit=rate_limit,
        )
        self._stateful_sets.add_handler(self.loop.on_change(own_key))
        self._stateful_sets.add_handler(self._forget_deleted)
        self._pods.add_handler(
            self.loop.on_change(
                map_by_owner(group="apps", kind="StatefulSet", controller_only=True)
            )
        )

    def _forget_deleted(self, old: StatefulSet | None, new: StatefulSet | None) -> None:
        if new is None and old is not None:
            self._expectations.forget(old.metadata.uid)

    async def reconcile(self, key: ObjectKey) -> Result:
        sts = self._stateful_sets.cache.get(str(key))
        if sts is None:
            return Result()
        pods = self._pods.cache.by_index(BY_CONTROLLER, sts.metadata.uid)
        error: KubeApiError | None = None
        if sts.metadata.deletion_timestamp is None:
            outstanding = self._expectations.outstanding(sts.metadata.uid, pods)
            plan = plan_stateful_set(sts, pods, outstanding)
            try:
                if plan.delete:
                    await self._pod_control.delete(sts, plan.delete)
                if plan.create:
                    await self._pod_control.create(sts, [pod_for(sts, o) for o in plan.create])
            except KubeApiError as exc:
                error = exc
        now = datetime.now(UTC)
        status = stateful_set_status(sts, pods, now=now)
        if status != sts.status:
            try:
                await self._client.patch(
                    STATEFUL_SETS,
                    sts.metadata.name,
                    status_patch(status),
                    namespace=sts.metadata.namespace,
                    subresource="status",
                )
            except KubeApiError as exc:
                if not exc.not_found:
                    raise
        if error is not None:
            raise error
        wait = next_availability(
            (p for p in pods if not is_terminal(p) and not is_terminating(p)),
            min_ready_seconds=sts.spec.min_ready_seconds,
            now=now,
        )
        return Result(requeue_after=wait)
