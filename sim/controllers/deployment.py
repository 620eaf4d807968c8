"""Deployment controller: one ReplicaSet per pod template, rolled out by the Deployment's strategy.

Each reconcile reads the Deployment and its ReplicaSets (controller ownerReference with its uid)
from the cache, takes one step of the rollout computed in :mod:`sim.controllers.rollout`,
applies it (create the new ReplicaSet, set ``spec.replicas`` of the ones that change, bump the
revision of a ReplicaSet that became new again, delete empty ones beyond
``revisionHistoryLimit``) and writes the status through the status subresource. The pods
themselves are the ReplicaSet controller's business; the ReplicaSets' status changes bring the
Deployment back here, which is how a rollout advances.

A name clash (a ReplicaSet ``<deployment>-<hash>`` that is not this template's) bumps
``status.collisionCount`` so that the next attempt hashes to another name. A paused Deployment
only has its status updated.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import msgspec

from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.keys import ObjectKey
from shared.kube.mapping import map_by_owner, own_key
from shared.kube.models import Pod
from shared.kube.ratelimit import RateLimitSettings
from shared.kube.reconcile import Result
from shared.kube.recorder import EventRecorder
from shared.kube.resources import DEPLOYMENTS, REPLICA_SETS
from shared.metrics import Metrics
from sim.controllers.informers import BY_CONTROLLER, SharedInformers
from sim.controllers.loop import Loop
from sim.controllers.objects import (
    REVISION_ANNOTATION,
    Deployment,
    ReplicaSet,
    controller_of,
    status_patch,
)
from sim.controllers.pods import is_terminal
from sim.controllers.rollout import (
    RolloutPlan,
    deployment_status,
    history_to_delete,
    is_new,
    next_revision,
    recreate_plan,
    replica_set_body,
    rolling_plan,
    split,
    template_hash,
)

_decode_replica_set = msgspec.json.Decoder(ReplicaSet)


class HashCollisionError(Exception):
    """The new ReplicaSet's name is taken by another template; retried with the next hash."""


class DeploymentController:
    """Reconciles Deployments; see the module docstring."""

    def __init__(
        self,
        client: KubeClient,
        informers: SharedInformers,
        *,
        metrics: Metrics,
        recorder: EventRecorder | None,
        workers: int,
        rate_limit: RateLimitSettings,
    ) -> None:
        self._client = client
        self._recorder = recorder
        self._deployments = informers.deployments
        self._replica_sets = informers.replica_sets
        self._pods = informers.pods
        self.loop = Loop(
            name="sim-deployment",
            reconcile=self.reconcile,
            metrics=metrics,
            workers=workers,
            rate_limit=rate_limit,
        )
        self._deployments.add_handler(self.loop.on_change(own_key))
        self._replica_sets.add_handler(
            self.loop.on_change(map_by_owner(group="apps", kind="Deployment", controller_only=True))
        )
        # Recreate waits for the old pods to be gone, which only pod events tell.
        self._pods.add_handler(self.loop.on_change(self._recreating_deployment_of))

    def _recreating_deployment_of(self, obj: object) -> Iterator[ObjectKey]:
        if not isinstance(obj, Pod):
            return
        owner = controller_of(obj)
        if owner is None or owner.kind != "ReplicaSet":
            return
        namespace = obj.metadata.namespace
        rs = self._replica_sets.cache.get(f"{namespace}/{owner.name}")
        if rs is None or rs.metadata.uid != owner.uid:
            return
        deployment_ref = controller_of(rs)
        if deployment_ref is None or deployment_ref.kind != "Deployment":
            return
        deployment = self._deployments.cache.get(f"{namespace}/{deployment_ref.name}")
        if deployment is not None and deployment.spec.strategy.type == "Recreate":
            yield ObjectKey(namespace=namespace, name=deployment_ref.name)

    async def _event(self, deployment: Deployment, reason: str, message: str) -> None:
        if self._recorder is not None:
            await self._recorder.record(
                DEPLOYMENTS, deployment, type_="Normal", reason=reason, message=message
            )

    async def reconcile(self, key: ObjectKey) -> Result:
        deployment = self._deployments.cache.get(str(key))
        if deployment is None or deployment.metadata.deletion_timestamp is not None:
            return Result()
        owned = self._replica_sets.cache.by_index(BY_CONTROLLER, deployment.metadata.uid)
        new, old = split(deployment, owned)
        collision_count = deployment.status.collision_count
        if not deployment.spec.paused:
            try:
                new, owned = await self._roll(deployment, new, old, owned)
            except HashCollisionError:
                collision_count = (collision_count or 0) + 1
                await self._write_status(deployment, new, owned, collision_count)
                raise
            await self._clean_history(deployment, old)
        await self._write_status(deployment, new, owned, collision_count)
        return Result()

    async def _roll(
        self,
        deployment: Deployment,
        new: ReplicaSet | None,
        old: list[ReplicaSet],
        owned: list[ReplicaSet],
    ) -> tuple[ReplicaSet | None, list[ReplicaSet]]:
        plan: RolloutPlan
        if deployment.spec.strategy.type == "Recreate":
            plan = recreate_plan(deployment, new, old, old_pods_running=self._old_pods_running(old))
        else:
            plan = rolling_plan(deployment, new, old)
        if plan.new_replicas is not None:
            if new is None:
                new = await self._create_new(deployment, old, plan.new_replicas)
                owned = [*owned, new]
            elif new.spec.replicas != plan.new_replicas:
                await self._scale(deployment, new, plan.new_replicas)
        for rs in old:
            target = plan.old_replicas.get(rs.metadata.name)
            if target is not None and target != rs.spec.replicas:
                await self._scale(deployment, rs, target)
        if new is not None and old and new.revision <= max(rs.revision for rs in old):
            await self._client.patch(
                REPLICA_SETS,
                new.metadata.name,
                {"metadata": {"annotations": {REVISION_ANNOTATION: str(next_revision(old))}}},
                namespace=new.metadata.namespace,
            )
        return new, owned

    def _old_pods_running(self, old: list[ReplicaSet]) -> bool:
        for rs in old:
            for pod in self._pods.cache.by_index(BY_CONTROLLER, rs.metadata.uid):
                if not is_terminal(pod):
                    return True
        return False

    async def _create_new(
        self, deployment: Deployment, old: list[ReplicaSet], replicas: int
    ) -> ReplicaSet:
        pod_hash = template_hash(deployment.spec.template, deployment.status.collision_count)
        body = replica_set_body(
            deployment, pod_hash=pod_hash, replicas=replicas, revision=next_revision(old)
        )
        name = body["metadata"]["name"]
        namespace = deployment.metadata.namespace
        try:
            raw = await self._client.create(REPLICA_SETS, body, namespace=namespace)
        except KubeApiError as exc:
            if not exc.already_exists:
                raise
            existing = await self._client.get_or_none(REPLICA_SETS, name, namespace=namespace)
            if existing is None:
                raise  # deleted meanwhile: try again
            rs = _decode_replica_set.decode(existing)
            owner = controller_of(rs)
            if (
                owner is not None
                and owner.uid == deployment.metadata.uid
                and is_new(rs, deployment)
            ):
                return rs  # ours; the cache had not caught up
            raise HashCollisionError(
                f"replica set {namespace}/{name} exists with another template"
            ) from exc
        await self._event(
            deployment, "ScalingReplicaSet", f"Scaled up replica set {name} from 0 to {replicas}"
        )
        return _decode_replica_set.decode(raw)

    async def _scale(self, deployment: Deployment, rs: ReplicaSet, replicas: int) -> None:
        await self._client.patch(
            REPLICA_SETS,
            rs.metadata.name,
            {"spec": {"replicas": replicas}},
            namespace=rs.metadata.namespace,
        )
        direction = "up" if replicas > rs.spec.replicas else "down"
        await self._event(
            deployment,
            "ScalingReplicaSet",
            f"Scaled {direction} replica set {rs.metadata.name} "
            f"from {rs.spec.replicas} to {replicas}",
        )

    async def _clean_history(self, deployment: Deployment, old: list[ReplicaSet]) -> None:
        for rs in history_to_delete(deployment, old):
            await self._client.delete(
                REPLICA_SETS, rs.metadata.name, namespace=rs.metadata.namespace, uid=rs.metadata.uid
            )

    async def _write_status(
        self,
        deployment: Deployment,
        new: ReplicaSet | None,
        owned: list[ReplicaSet],
        collision_count: int | None,
    ) -> None:
        status = deployment_status(
            deployment, new, owned, now=datetime.now(UTC), collision_count=collision_count
        )
        if status == deployment.status:
            return
        try:
            await self._client.patch(
                DEPLOYMENTS,
                deployment.metadata.name,
                status_patch(status),
                namespace=deployment.metadata.namespace,
                subresource="status",
            )
        except KubeApiError as exc:
            if not exc.not_found:
                raise
