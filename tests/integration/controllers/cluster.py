"""Driving the emulator as the controllers' tests need: objects in, state out, kubelet stand-in.

The tests play the parts of the user (apply a Deployment, scale it, delete a pod) and of the
kubelet (mark pods Running/Ready/Succeeded/Failed), always over HTTP, and read results back
from the API server, never from the controllers.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

import msgspec

from shared.kube.client import KubeClient
from shared.kube.meta import KubeObject, ListMeta
from shared.kube.models import Pod, ResourceClaim
from shared.kube.resources import (
    DEPLOYMENTS,
    JOBS,
    PODS,
    REPLICA_SETS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    Resource,
)
from sim.controllers.objects import Deployment, Job, ReplicaSet, controller_of
from sim.controllers.pods import is_active, is_ready

NAMESPACE = "default"
T = TypeVar("T", bound=KubeObject)


class _List(msgspec.Struct, Generic[T], frozen=True, kw_only=True):
    metadata: ListMeta = msgspec.field(default_factory=ListMeta)
    items: list[T] = msgspec.field(default_factory=list)


def pod_template(
    *,
    image: str = "app:1",
    claims: list[dict[str, Any]] | None = None,
    restart: str = "Always",
    **labels: str,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": image}
    spec: dict[str, Any] = {"containers": [container], "restartPolicy": restart}
    if claims:
        spec["resourceClaims"] = claims
        container["resources"] = {"claims": [{"name": c["name"]} for c in claims]}
    return {"metadata": {"labels": labels or {"app": "web"}}, "spec": spec}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Cluster:
    """The API server as a user and a kubelet see it (namespace ``default``)."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client

    async def _list(self, resource: Resource, kind: type[T]) -> list[T]:
        raw = await self.client.list(resource, namespace=NAMESPACE)
        return msgspec.json.decode(raw, type=_List[kind]).items  # type: ignore[valid-type]

    async def _get(self, resource: Resource, name: str, kind: type[T]) -> T | None:
        raw = await self.client.get_or_none(resource, name, namespace=NAMESPACE)
        return None if raw is None else msgspec.json.decode(raw, type=kind)

    # -- user -----------------------------------------------------------------------------------

    async def create_deployment(
        self,
        name: str,
        *,
        replicas: int,
        template: dict[str, Any] | None = None,
        strategy: dict[str, Any] | None = None,
    ) -> Deployment:
        template = template or pod_template()
        spec: dict[str, Any] = {
            "replicas": replicas,
            "selector": {"matchLabels": template["metadata"]["labels"]},
            "template": template,
        }
        if strategy is not None:
            spec["strategy"] = strategy
        body = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name},
            "spec": spec,
        }
        raw = await self.client.create(DEPLOYMENTS, body, namespace=NAMESPACE)
        return msgspec.json.decode(raw, type=Deployment)

    async def scale(self, name: str, replicas: int) -> None:
        await self.client.patch(
            DEPLOYMENTS, name, {"spec": {"replicas": replicas}}, namespace=NAMESPACE
        )

    async def set_image(self, name: str, image: str) -> None:
        patch = {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": image}]}}}}
        await self.client.patch(
            DEPLOYMENTS, name, patch, namespace=NAMESPACE, patch_type="strategic"
        )

    async def create_job(
        self,
        name: str,
        *,
        parallelism: int,
        completions: int | None,
        backoff_limit: int = 6,
        indexed: bool = False,
    ) -> Job:
        spec: dict[str, Any] = {
            "parallelism": parallelism,
            "backoffLimit": backoff_limit,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "batch:1"}],
                }
            },
        }
        if completions is not None:
            spec["completions"] = completions
        if indexed:
            spec["completionMode"] = "Indexed"
        body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}
        raw = await self.client.create(JOBS, body, namespace=NAMESPACE)
        return msgspec.json.decode(raw, type=Job)

    async def create_claim_template(
        self, name: str, *, labels: dict[str, str], annotations: dict[str, str] | None = None
    ) -> None:
        body = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name},
            "spec": {
                "metadata": {"labels": labels, "annotations": annotations or {}},
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "channel",
                                "exactly": {"deviceClassName": "compute-domain-channel.cdo.dev"},
                            }
                        ]
                    }
                },
            },
        }
        await self.client.create(RESOURCE_CLAIM_TEMPLATES, body, namespace=NAMESPACE)

    async def create_pod(self, name: str, template: dict[str, Any]) -> Pod:
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, **template["metadata"]},
        }
        body["spec"] = template["spec"]
        raw = await self.client.create(PODS, body, namespace=NAMESPACE)
        return msgspec.json.decode(raw, type=Pod)

    async def delete_pod(self, pod: Pod) -> None:
        await self.client.delete(PODS, pod.metadata.name, namespace=NAMESPACE)

    # -- kubelet --------------------------------------------------------------------------------

    async def bind(self, pod: Pod, node: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod.metadata.name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        path = PODS.path(namespace=NAMESPACE, name=pod.metadata.name, subresource="binding")
        await self.client.request("POST", path, body=body)

    async def set_phase(self, pod: Pod, phase: str, *, ready: bool = False) -> None:
        status: dict[str, Any] = {"phase": phase}
        status["conditions"] = [
            {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": _now()}
        ]
        await self.client.patch(
            PODS,
            pod.metadata.name,
            {"status": status},
            namespace=NAMESPACE,
            subresource="status",
            patch_type="strategic",
        )

    async def run_pods(self) -> int:
        """Mark every active pod that is not ready Running and Ready; how many it marked."""
        marked = 0
        for pod in await self.pods():
            if is_active(pod) and not is_ready(pod):
                await self.set_phase(pod, "Running", ready=True)
                marked += 1
        return marked

    # -- reading --------------------------------------------------------------------------------

    async def pods(self) -> list[Pod]:
        return await self._list(PODS, Pod)

    async def pods_of(self, owner: KubeObject) -> list[Pod]:
        """Pods whose controller is ``owner``."""
        uid = owner.metadata.uid
        return [p for p in await self.pods() if (ref := controller_of(p)) and ref.uid == uid]

    async def active_pods_of(self, owner: KubeObject) -> list[Pod]:
        return [p for p in await self.pods_of(owner) if is_active(p)]

    async def replica_sets(self) -> list[ReplicaSet]:
        return await self._list(REPLICA_SETS, ReplicaSet)

    async def replica_sets_of(self, deployment: Deployment) -> list[ReplicaSet]:
        uid = deployment.metadata.uid
        return [
            rs
            for rs in await self.replica_sets()
            if (ref := controller_of(rs)) is not None and ref.uid == uid
        ]

    async def deployment(self, name: str) -> Deployment:
        found = await self._get(DEPLOYMENTS, name, Deployment)
        assert found is not None
        return found

    async def job(self, name: str) -> Job:
        found = await self._get(JOBS, name, Job)
        assert found is not None
        return found

    async def pod(self, name: str) -> Pod | None:
        return await self._get(PODS, name, Pod)

    async def claims(self) -> list[ResourceClaim]:
        return await self._list(RESOURCE_CLAIMS, ResourceClaim)

    async def claim(self, name: str) -> ResourceClaim | None:
        return await self._get(RESOURCE_CLAIMS, name, ResourceClaim)
