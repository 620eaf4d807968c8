"""LeaderWorkerSet controller (``leaderworkerset.x-k8s.io/v1``): groups of a leader and its workers,
each group a unit, as the upstream LWS controller does it, on top of StatefulSets.

What it keeps, from the cache:

- a leader StatefulSet ``<lws>`` (controller: the LWS) with ``replicas`` = ``spec.replicas``
  (the groups), ``podManagementPolicy: Parallel``, ``serviceName: <lws>``, the pod template
  ``leaderTemplate`` (``workerTemplate`` when there is none) with the labels
  ``leaderworkerset.sigs.k8s.io/name`` and ``worker-index: "0"`` and the annotation
  ``leaderworkerset.sigs.k8s.io/size``; its pods are the leaders ``<lws>-<group>``;
- on each leader pod the labels ``group-index`` (its ordinal) and ``group-key`` (SHA-1 of
  ``<namespace>/<leader pod name>``, unique to the group);
- per leader pod, a worker StatefulSet ``<lws>-<group>`` whose controller is the leader pod
  (so it goes with its leader through the garbage collector), ``replicas: size - 1``,
  ``ordinals.start: 1``, ``Parallel``, with ``name``, ``group-index`` and ``group-key`` on itself
  and its pod template and the annotations ``size`` and ``leader-name``; its pods are the workers
  ``<lws>-<group>-<1..size-1>``, each given the label ``worker-index`` (its ordinal);
- ``restartPolicy: RecreateGroupOnPodRestart`` (the default): a pod of a group that failed, or a
  worker that was deleted or is being deleted while its leader lives, makes the controller delete
  the group's leader pod; the worker StatefulSet and its pods follow it, the leader StatefulSet
  makes the leader again under the same name, and a new worker StatefulSet follows. Other groups
  are not touched. ``None`` leaves single pods to their StatefulSets;
- status: ``replicas`` (groups with a leader pod), ``readyReplicas`` (groups whose ``size`` pods
  are all ready), ``updatedReplicas``, ``hpaPodSelector`` (the leaders' selector, for the scale
  subresource), ``observedGeneration``, and the conditions ``Available`` (``AllGroupsReady``
  once every group is ready) and ``Progressing`` (``GroupsProgressing`` until then).

Upstream sets the per-pod labels (``group-index`` and ``group-key`` on leaders, ``worker-index`` on
workers) in a mutating pod webhook, so pods have them from creation; here this controller patches
them on right after the pods appear. Not simulated: rolling updates of a changed template (existing
StatefulSets keep theirs; only ``replicas`` and ``size`` follow the LWS) and the
``template-revision-hash`` label, the headless Service, ``startupPolicy: LeaderReady`` (workers
start with their leader), ``RecreateGroupAfterStart`` (treated as ``RecreateGroupOnPodRestart``),
container restarts (the simulated kubelet restarts none), subgroups, exclusive placement,
``groupIdentity: Hash``, ``volumeClaimTemplates`` and the ``LWS_*`` environment variables. A worker
deletion is noticed from the watch event: one the controller missed while it was down does not
recreate its group.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
from datetime import UTC, datetime
from typing import Any

from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.keys import ObjectKey
from shared.kube.mapping import map_by_label, own_key
from shared.kube.models import Pod
from shared.kube.ratelimit import RateLimitSettings
from shared.kube.reconcile import Result
from shared.kube.resources import LEADER_WORKER_SETS, PODS, STATEFUL_SETS
from shared.metrics import Metrics
from sim.controllers.informers import BY_CONTROLLER, SharedInformers
from sim.controllers.loop import Loop
from sim.controllers.objects import (
    StatefulSet,
    controller_of,
    controller_reference,
    status_patch,
    timestamp,
)
from sim.controllers.pods import is_ready, is_terminating
from sim.controllers.setkinds import (
    LeaderWorkerSet,
    LeaderWorkerSetStatus,
    SetCondition,
    set_condition,
)
from sim.controllers.statefulset import POD_INDEX_LABEL

PREFIX = "leaderworkerset.sigs.k8s.io/"
NAME = PREFIX + "name"
GROUP_INDEX = PREFIX + "group-index"
GROUP_KEY = PREFIX + "group-key"
WORKER_INDEX = PREFIX + "worker-index"
SIZE = PREFIX + "size"
REPLICAS = PREFIX + "replicas"
LEADER_NAME = PREFIX + "leader-name"
RECREATE_GROUP = ("RecreateGroupOnPodRestart", "RecreateGroupAfterStart")
BY_SET = "leaderworkerset"
"""Index of pods by ``namespace/<lws>`` of their ``leaderworkerset.sigs.k8s.io/name`` label."""


def _set_of(pod: Pod) -> list[str]:
    name = pod.metadata.labels.get(NAME)
    return [f"{pod.metadata.namespace}/{name}"] if name else []


def group_key(namespace: str, leader_name: str) -> str:
    return hashlib.sha1(f"{namespace}/{leader_name}".encode()).hexdigest()


def _template(
    template: dict[str, Any], labels: dict[str, str], annotations: dict[str, str]
) -> dict[str, Any]:
    out = copy.deepcopy(template)
    meta: dict[str, Any] = out.setdefault("metadata", {})
    meta["labels"] = dict(meta.get("labels") or {}) | labels
    meta["annotations"] = dict(meta.get("annotations") or {}) | annotations
    return out


def leader_stateful_set(lws: LeaderWorkerSet) -> dict[str, Any]:
    """The leader StatefulSet ``<lws>``."""
    meta = lws.metadata
    lwt = lws.spec.leader_worker_template
    selector = {NAME: meta.name, WORKER_INDEX: "0"}
    template = lwt.leader_template if lwt.leader_template is not None else lwt.worker_template
    return {
        "apiVersion": STATEFUL_SETS.api_version,
        "kind": STATEFUL_SETS.kind,
        "metadata": {
            "name": meta.name,
            "namespace": meta.namespace,
            "labels": {NAME: meta.name},
            "annotations": {REPLICAS: str(lws.spec.replicas)},
            "ownerReferences": [controller_reference(LEADER_WORKER_SETS, lws)],
        },
        "spec": {
            "replicas": lws.spec.replicas,
            "podManagementPolicy": "Parallel",
            "serviceName": meta.name,
            "selector": {"matchLabels": selector},
            "template": _template(template, selector, {SIZE: str(lwt.size)}),
        },
    }


def worker_stateful_set(lws: LeaderWorkerSet, leader: Pod, group: str) -> dict[str, Any]:
    """The worker StatefulSet ``<lws>-<group>`` of one leader pod."""
    meta = lws.metadata
    lwt = lws.spec.leader_worker_template
    key = group_key(meta.namespace, leader.metadata.name)
    labels = {NAME: meta.name, GROUP_INDEX: group, GROUP_KEY: key}
    return {
        "apiVersion": STATEFUL_SETS.api_version,
        "kind": STATEFUL_SETS.kind,
        "metadata": {
            "name": f"{meta.name}-{group}",
            "namespace": meta.namespace,
            "labels": labels,
            "ownerReferences": [controller_reference(PODS, leader)],
        },
        "spec": {
            "replicas": max(0, lwt.size - 1),
            "ordinals": {"start": 1},
            "podManagementPolicy": "Parallel",
            "serviceName": meta.name,
            "selector": {"matchLabels": {NAME: meta.name, GROUP_KEY: key}},
            "template": _template(
                lwt.worker_template,
                labels,
                {SIZE: str(lwt.size), LEADER_NAME: leader.metadata.name},
            ),
        },
    }


def missing_labels(lws: LeaderWorkerSet, pod: Pod) -> dict[str, str]:
    """The per-pod labels a pod of the LWS lacks (upstream's pod webhook sets them)."""
    labels = pod.metadata.labels
    ordinal = labels.get(POD_INDEX_LABEL, "")
    if not ordinal.isdigit():
        return {}
    wanted: dict[str, str] = {}
    if labels.get(WORKER_INDEX) == "0":
        wanted = {
            GROUP_INDEX: ordinal,
            GROUP_KEY: group_key(lws.metadata.namespace, pod.metadata.name),
        }
    else:
        wanted = {WORKER_INDEX: ordinal}
    return {k: v for k, v in wanted.items() if labels.get(k) != v}


def lws_status(
    lws: LeaderWorkerSet, leaders: list[Pod], group_pods: dict[str, list[Pod]], *, now: str
) -> LeaderWorkerSetStatus:
    size = lws.spec.leader_worker_template.size
    ready = 0
    for leader in leaders:
        pods = group_pods.get(leader.metadata.uid, [])
        if sum(1 for p in pods if is_ready(p) and not is_terminating(p)) >= size:
            ready += 1
    available = ready >= lws.spec.replicas
    generation = lws.metadata.generation
    conditions = set_condition(
        lws.status.conditions,
        SetCondition(
            type="Available",
            status="True" if available else "False",
            reason="AllGroupsReady" if available else "GroupsNotReady",
            message="All replicas are ready" if available else "Not all replicas are ready",
            observed_generation=generation,
        ),
        now=now,
    )
    conditions = set_condition(
        conditions,
        SetCondition(
            type="Progressing",
            status="False" if available else "True",
            reason="GroupsProgressing" if not available else "AllGroupsReady",
            message="Replicas are progressing" if not available else "All replicas are ready",
            observed_generation=generation,
        ),
        now=now,
    )
    return LeaderWorkerSetStatus(
        conditions=conditions,
        ready_replicas=ready,
        updated_replicas=len(leaders),
        replicas=len(leaders),
        hpa_pod_selector=f"{NAME}={lws.metadata.name},{WORKER_INDEX}=0",
        observed_generation=generation,
    )


class LeaderWorkerSetController:
    """Reconciles LeaderWorkerSets; see the module docstring."""

    def __init__(
        self,
        client: KubeClient,
        informers: SharedInformers,
        *,
        metrics: Metrics,
        workers: int,
        rate_limit: RateLimitSettings,
    ) -> None:
        self._client = client
        self._sets = informers.leader_worker_sets
        self._stateful_sets = informers.stateful_sets
        self._pods = informers.pods
        # Leader pods (by uid) whose group lost a worker while the leader lived.
        self._restart: set[str] = set()
        self.loop = Loop(
            name="sim-leaderworkerset",
            reconcile=self.reconcile,
            metrics=metrics,
            workers=workers,
            rate_limit=rate_limit,
        )
        self._sets.add_handler(self.loop.on_change(own_key))
        self._stateful_sets.add_handler(self.loop.on_change(map_by_label(NAME)))
        self._pods.add_index(BY_SET, _set_of)
        self._pods.add_handler(self._note_worker_gone)
        self._pods.add_handler(self.loop.on_change(map_by_label(NAME)))

    def _leader_of(self, worker: Pod) -> Pod | None:
        owner = controller_of(worker)
        if owner is None or owner.kind != "StatefulSet":
            return None
        sts = self._stateful_sets.cache.get(f"{worker.metadata.namespace}/{owner.name}")
        if sts is None or sts.metadata.uid != owner.uid:
            return None
        leader_ref = controller_of(sts)
        if leader_ref is None or leader_ref.kind != "Pod":
            return None
        leader = self._pods.cache.get(f"{worker.metadata.namespace}/{leader_ref.name}")
        if leader is None or leader.metadata.uid != leader_ref.uid or is_terminating(leader):
            return None
        return leader

    def _note_worker_gone(self, old: Pod | None, new: Pod | None) -> None:
        pod = old if new is None else new
        if pod is None or pod.metadata.labels.get(WORKER_INDEX, "0") == "0":
            return
        deleted = new is None or (is_terminating(new) and (old is None or not is_terminating(old)))
        if not deleted:
            return
        leader = self._leader_of(pod)
        if leader is not None:
            self._restart.add(leader.metadata.uid)

    def _pods_of(self, lws: LeaderWorkerSet) -> list[Pod]:
        return self._pods.cache.by_index(BY_SET, lws.key)

    async def reconcile(self, key: ObjectKey) -> Result:
        lws = self._sets.cache.get(str(key))
        if lws is None or lws.metadata.deletion_timestamp is not None:
            return Result()
        namespace = lws.metadata.namespace
        leader_sts = self._stateful_sets.cache.get(f"{namespace}/{lws.metadata.name}")
        if leader_sts is None:
            try:
                await self._client.create(
                    STATEFUL_SETS, leader_stateful_set(lws), namespace=namespace
                )
            except KubeApiError as exc:
                if not exc.already_exists:
                    raise
            return Result()
        ref = controller_of(leader_sts)
        if ref is None or ref.uid != lws.metadata.uid:
            return Result()  # not ours (or a predecessor's, on its way out)
        if leader_sts.spec.replicas != lws.spec.replicas:
            await self._client.patch(
                STATEFUL_SETS,
                leader_sts.metadata.name,
                {
                    "metadata": {"annotations": {REPLICAS: str(lws.spec.replicas)}},
                    "spec": {"replicas": lws.spec.replicas},
                },
                namespace=namespace,
            )
        pods = self._pods_of(lws)
        # Upstream's webhook labels pods as they are created; here the patches go out together
        # so that a large LWS is not labelled one pod per round trip.
        async with asyncio.TaskGroup() as patches:
            for pod in pods:
                labels = missing_labels(lws, pod)
                if labels and not is_terminating(pod):
                    patches.create_task(self._patch_labels(pod, labels))
        # A failed leader still counts: its group is recreated below.
        leaders = [
            p
            for p in self._pods.cache.by_index(BY_CONTROLLER, leader_sts.metadata.uid)
            if not is_terminating(p)
        ]
        group_pods: dict[str, list[Pod]] = {}
        recreate = lws.spec.leader_worker_template.restart_policy in RECREATE_GROUP
        async with asyncio.TaskGroup() as tasks:  # the groups are independent of each other
            for leader in leaders:
                group = leader.metadata.labels.get(POD_INDEX_LABEL, "")
                if not group.isdigit():
                    continue
                worker_sts = self._stateful_sets.cache.get(
                    f"{namespace}/{lws.metadata.name}-{group}"
                )
                workers = self._workers(worker_sts, leader)
                group_pods[leader.metadata.uid] = [leader, *workers]
                if recreate and self._group_broken(leader, workers):
                    tasks.create_task(self._delete_leader(leader))
                    continue
                tasks.create_task(self._keep_workers(lws, leader, group, worker_sts))
        status = lws_status(lws, leaders, group_pods, now=timestamp(datetime.now(UTC)))
        if status != lws.status:
            try:
                await self._client.patch(
                    LEADER_WORKER_SETS,
                    lws.metadata.name,
                    status_patch(status),
                    namespace=namespace,
                    subresource="status",
                )
            except KubeApiError as exc:
                if not exc.not_found:
                    raise
        return Result()

    def _workers(self, worker_sts: StatefulSet | None, leader: Pod) -> list[Pod]:
        if worker_sts is None:
            return []
        owner = controller_of(worker_sts)
        if owner is None or owner.uid != leader.metadata.uid:
            return []
        return self._pods.cache.by_index(BY_CONTROLLER, worker_sts.metadata.uid)

    def _group_broken(self, leader: Pod, workers: list[Pod]) -> bool:
        if leader.metadata.uid in self._restart:
            return True
        return any(p.status.phase == "Failed" for p in (leader, *workers))

    async def _delete_leader(self, leader: Pod) -> None:
        meta = leader.metadata
        try:
            await self._client.delete(PODS, meta.name, namespace=meta.namespace, uid=meta.uid)
        except KubeApiError as exc:
            if not (exc.conflict or exc.not_found):
                raise
        self._restart.discard(meta.uid)

    async def _keep_workers(
        self, lws: LeaderWorkerSet, leader: Pod, group: str, worker_sts: StatefulSet | None
    ) -> None:
        namespace = lws.metadata.namespace
        if worker_sts is None:
            try:
                await self._client.create(
                    STATEFUL_SETS, worker_stateful_set(lws, leader, group), namespace=namespace
                )
            except KubeApiError as exc:
                if not exc.already_exists:
                    raise
            return
        owner = controller_of(worker_sts)
        if owner is None or owner.uid != leader.metadata.uid:
            return  # the previous leader's, being collected; its deletion brings us back
        replicas = max(0, lws.spec.leader_worker_template.size - 1)
        if worker_sts.spec.replicas != replicas:
            await self._client.patch(
                STATEFUL_SETS,
                worker_sts.metadata.name,
                {"spec": {"replicas": replicas}},
                namespace=namespace,
            )

    async def _patch_labels(self, pod: Pod, labels: dict[str, str]) -> None:
        meta = pod.metadata
        try:
            await self._client.patch(
                PODS,
                meta.name,
                {"metadata": {"uid": meta.uid, "labels": labels}},
                namespace=meta.namespace,
            )
        except KubeApiError as exc:
            if not (exc.not_found or exc.conflict):
                raise
