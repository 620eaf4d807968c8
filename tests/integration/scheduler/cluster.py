"""Building nodes, pods and DRA objects for scheduler tests, and reading results back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from shared.kube.client import KubeClient
from shared.kube.resources import (
    DEVICE_CLASSES,
    NODES,
    PODS,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
)
from sim.scheduler.objects import Pod, ResourceClaim
from tests.support.wait import wait_for

CLIQUE = "nvidia.com/gpu.clique"
NAMESPACE = "default"


def node(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    gpus: int = 4,
    cpu: str = "64",
    memory: str = "512Gi",
    taints: list[dict[str, str]] | None = None,
    ready: bool = True,
    unschedulable: bool = False,
) -> dict[str, Any]:
    amounts = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpus:
        amounts["nvidia.com/gpu"] = str(gpus)
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, **(labels or {})},
        },
        "spec": spec,
        "status": {
            "capacity": amounts,
            "allocatable": amounts,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    gpus: int = 0,
    cpu: str = "",
    node_selector: dict[str, str] | None = None,
    affinity: dict[str, Any] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    gates: list[str] | None = None,
    claims: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    if cpu:
        resources["requests"] = {"cpu": cpu}
    container: dict[str, Any] = {"name": "main", "image": "busybox", "resources": resources}
    spec: dict[str, Any] = {"containers": [container]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity:
        spec["affinity"] = affinity
    if tolerations:
        spec["tolerations"] = tolerations
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if claims:
        spec["resourceClaims"] = claims
        container["resources"]["claims"] = [{"name": c["name"]} for c in claims]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels or {}},
        "spec": spec,
    }


def device_class(name: str, expression: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def resource_slice(
    name: str, *, node_name: str, driver: str, devices: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def claim(name: str, *, device_class_name: str, selectors: Sequence[str] = ()) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class_name}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"devices": {"requests": [{"name": "slot", "exactly": exactly}]}},
    }


async def create_node(client: KubeClient, body: dict[str, Any]) -> None:
    await client.create(NODES, body)


async def create_pod(client: KubeClient, body: dict[str, Any]) -> None:
    await client.create(PODS, body, namespace=NAMESPACE)


async def create_class(client: KubeClient, body: dict[str, Any]) -> None:
    await client.create(DEVICE_CLASSES, body)


async def create_slice(client: KubeClient, body: dict[str, Any]) -> None:
    await client.create(RESOURCE_SLICES, body)


async def create_claim(client: KubeClient, body: dict[str, Any]) -> None:
    await client.create(RESOURCE_CLAIMS, body, namespace=NAMESPACE)


async def get_pod(client: KubeClient, name: str) -> Pod:
    return msgspec.json.decode(await client.get(PODS, name, namespace=NAMESPACE), type=Pod)


async def get_claim(client: KubeClient, name: str) -> ResourceClaim:
    raw = await client.get(RESOURCE_CLAIMS, name, namespace=NAMESPACE)
    return msgspec.json.decode(raw, type=ResourceClaim)


async def wait_bound(client: KubeClient, name: str, *, within_s: float = 10.0) -> str:
    """The node the pod gets bound to."""

    async def bound() -> str:
        return (await get_pod(client, name)).spec.node_name

    return await wait_for(bound, timeout=within_s, what=f"pod {name} bound")


async def wait_unschedulable(client: KubeClient, name: str, *, contains: str = "") -> str:
    """The PodScheduled=False message, once it mentions ``contains``."""

    async def message() -> str:
        condition = (await get_pod(client, name)).condition("PodScheduled")
        if (
            condition is not None
            and condition.status == "False"
            and condition.reason == "Unschedulable"
            and contains in condition.message
        ):
            return condition.message
        return ""

    return await wait_for(message, what=f"pod {name} reported unschedulable ({contains!r})")
