"""Structs for scheduler unit tests, built from the API's JSON shapes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from shared.kube.models import Node
from sim.scheduler.facts import PodFacts, pod_facts
from sim.scheduler.objects import DeviceClass, Namespace, Pod, ResourceClaim, ResourceSlice
from sim.scheduler.state import ClusterState

CLIQUE = "nvidia.com/gpu.clique"
DRIVER = "compute-domain.cdo.dev"


def make_node(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    gpus: int = 4,
    cpu: str = "8",
    memory: str = "32Gi",
    pods: str = "110",
    taints: list[dict[str, str]] | None = None,
    ready: str | None = "True",
    unschedulable: bool = False,
) -> Node:
    amounts = {"cpu": cpu, "memory": memory, "pods": pods}
    if gpus:
        amounts["nvidia.com/gpu"] = str(gpus)
    conditions = [] if ready is None else [{"type": "Ready", "status": ready}]
    return msgspec.convert(
        {
            "metadata": {
                "name": name,
                "labels": {"kubernetes.io/hostname": name, **(labels or {})},
            },
            "spec": {"taints": taints or [], "unschedulable": unschedulable},
            "status": {"allocatable": amounts, "conditions": conditions},
        },
        Node,
    )


def make_pod(
    name: str,
    *,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    gpus: int = 0,
    cpu: str = "",
    memory: str = "",
    node_name: str = "",
    node_selector: dict[str, str] | None = None,
    affinity: dict[str, Any] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    claims: list[dict[str, str]] | None = None,
    claim_statuses: list[dict[str, str]] | None = None,
    phase: str = "",
) -> Pod:
    requests: dict[str, str] = {}
    if cpu:
        requests["cpu"] = cpu
    if memory:
        requests["memory"] = memory
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    return msgspec.convert(
        {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"uid-{name}",
                "labels": labels or {},
            },
            "spec": {
                "nodeName": node_name,
                "nodeSelector": node_selector or {},
                "affinity": affinity,
                "tolerations": tolerations or [],
                "resourceClaims": claims or [],
                "containers": [
                    {"name": "main", "resources": {"requests": requests, "limits": limits}}
                ],
            },
            "status": {"phase": phase, "resourceClaimStatuses": claim_statuses or []},
        },
        Pod,
    )


def facts(pod: Pod) -> PodFacts:
    return pod_facts(pod)


def pod_affinity(
    *, key: str, labels: dict[str, str], anti: bool = False, **term: Any
) -> dict[str, Any]:
    field = "podAntiAffinity" if anti else "podAffinity"
    return {
        field: {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": key, "labelSelector": {"matchLabels": labels}, **term}
            ]
        }
    }


def make_namespace(name: str, labels: dict[str, str]) -> Namespace:
    return msgspec.convert({"metadata": {"name": name, "labels": labels}}, Namespace)


def make_class(name: str, *expressions: str, config: list[Any] | None = None) -> DeviceClass:
    return msgspec.convert(
        {
            "metadata": {"name": name},
            "spec": {
                "selectors": [{"cel": {"expression": e}} for e in expressions],
                "config": config or [],
            },
        },
        DeviceClass,
    )


def make_slice(
    name: str,
    *,
    devices: list[dict[str, Any]],
    driver: str = DRIVER,
    node_name: str = "",
    all_nodes: bool = False,
    node_selector: dict[str, Any] | None = None,
    pool: str = "",
    generation: int = 1,
) -> ResourceSlice:
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool or node_name or name, "generation": generation},
        "devices": devices,
    }
    if node_name:
        spec["nodeName"] = node_name
    if all_nodes:
        spec["allNodes"] = True
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    return msgspec.convert({"metadata": {"name": name}, "spec": spec}, ResourceSlice)


def device(name: str, attributes: dict[str, str | int | bool] | None = None) -> dict[str, Any]:
    typed: dict[str, Any] = {}
    for key, value in (attributes or {}).items():
        kind = "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else "string"
        typed[key] = {kind: value}
    return {"name": name, "attributes": typed}


def make_claim(
    name: str,
    *,
    requests: list[dict[str, Any]],
    namespace: str = "default",
    owner_uid: str = "",
    constraints: list[dict[str, Any]] | None = None,
    allocation: dict[str, Any] | None = None,
    reserved_for: list[dict[str, str]] | None = None,
    resource_version: str = "1",
) -> ResourceClaim:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "resourceVersion": resource_version,
    }
    if owner_uid:
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "owner", "uid": owner_uid}
        ]
    return msgspec.convert(
        {
            "metadata": metadata,
            "spec": {"devices": {"requests": requests, "constraints": constraints or []}},
            "status": {"allocation": allocation, "reservedFor": reserved_for or []},
        },
        ResourceClaim,
    )


def exactly(
    name: str, device_class: str, *selectors: str, count: int = 1, mode: str = "ExactCount"
) -> dict[str, Any]:
    return {
        "name": name,
        "exactly": {
            "deviceClassName": device_class,
            "selectors": [{"cel": {"expression": e}} for e in selectors],
            "allocationMode": mode,
            "count": count,
        },
    }


def cluster(nodes: Sequence[Node], pods: Sequence[Pod] = ()) -> ClusterState:
    state = ClusterState()
    for node in nodes:
        state.set_node(node)
    for pod in pods:
        state.observe_pod(pod)
    return state
