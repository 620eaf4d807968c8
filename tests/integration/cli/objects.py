"""Hand-made cluster objects for ``cdo explain`` and ``cdo top`` against the API emulator: nodes
in two cliques, ComputeDomains with the status the controller writes, the allocator's Placement,
pods with its gate and condition, and Events as the services record them."""

from __future__ import annotations

from typing import Any

from shared.crds import COMPUTE_DOMAINS, PLACEMENTS
from shared.crds.names import (
    CLIQUE_LABEL,
    GPU_FAULT_TAINT,
    GPU_HEALTHY_CONDITION,
    HOSTNAME_LABEL,
    IMEX_READY_CONDITION,
    PLACED_CONDITION,
    PLACEMENT_GATE,
)
from shared.kube.client import KubeClient
from shared.kube.resources import EVENTS, NAMESPACES, NODES, PODS

A = "9e1c3a52-0000-4000-8000-00000000c0de.1"
B = "9e1c3a52-0000-4000-8000-00000000c0de.2"
T = "2026-05-01T11:00:00Z"


def condition(kind: str, status: str, reason: str, message: str = "") -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message or f"{reason} here",
        "lastTransitionTime": T,
    }


async def namespace(client: KubeClient, name: str) -> None:
    await client.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )


async def node(
    client: KubeClient,
    name: str,
    clique: str,
    *,
    gpus: int = 4,
    fault: bool = False,
    imex: tuple[str, str] = ("True", "ImexReady"),
    gpu: tuple[str, str] = ("True", "GpuHealthy"),
) -> None:
    taints = [{"key": GPU_FAULT_TAINT, "value": "xid-79", "effect": "NoExecute"}] if fault else []
    await client.create(
        NODES,
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {CLIQUE_LABEL: clique, HOSTNAME_LABEL: name}},
            "spec": {"taints": taints},
        },
    )
    status = {
        "allocatable": {"nvidia.com/gpu": str(gpus), "cpu": "64", "memory": "512Gi"},
        "capacity": {"nvidia.com/gpu": str(gpus)},
        "conditions": [
            condition("Ready", "True", "KubeletReady"),
            condition(IMEX_READY_CONDITION, *imex),
            condition(GPU_HEALTHY_CONDITION, *gpu),
        ],
    }
    await client.patch(NODES, name, {"status": status}, subresource="status")


async def domain(
    client: KubeClient, namespace: str, name: str, conditions: list[dict[str, Any]]
) -> None:
    await client.create(
        COMPUTE_DOMAINS,
        {
            "apiVersion": COMPUTE_DOMAINS.api_version,
            "kind": "ComputeDomain",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"channel": {"resourceClaimTemplate": {"name": f"{name}-rct"}}},
        },
        namespace=namespace,
    )
    await client.patch(
        COMPUTE_DOMAINS,
        name,
        {"status": {"status": "NotReady", "conditions": conditions}},
        namespace=namespace,
        subresource="status",
    )


async def placement(
    client: KubeClient,
    namespace: str,
    name: str,
    *,
    members: dict[str, list[str]],
    clique: str = A,
    size: int = 0,
    waiting_since: str | None = None,
) -> None:
    """One slice in ``clique``: ``members`` maps each node to the pods pinned there (4 GPUs)."""
    pods = [pod for names in members.values() for pod in names]
    piece: dict[str, Any] = {
        "index": 0,
        "clique": clique,
        "channel": 3,
        "firstRank": 0,
        "size": size or len(pods),
        "members": [
            {
                "node": member,
                "slot": slot,
                "gpus": 4 * max(1, len(names)),
                "pods": [
                    {"name": pod, "rank": pods.index(pod), "uid": f"uid-{pod}"} for pod in names
                ],
            }
            for slot, (member, names) in enumerate(members.items())
        ],
    }
    if waiting_since:
        piece["waitingSince"] = waiting_since
    await client.create(
        PLACEMENTS,
        {
            "apiVersion": "cdo.dev/v1alpha1",
            "kind": "Placement",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"gpusPerPod": 4, "size": size or len(pods), "slices": [piece]},
        },
        namespace=namespace,
    )


async def pod(
    client: KubeClient,
    namespace: str,
    name: str,
    *,
    domain: str,
    node: str = "",
    gated: bool = False,
    placed: tuple[str, str, str] | None = None,
) -> None:
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "trainer"}],
        "resourceClaims": [{"name": "imex", "resourceClaimTemplateName": f"{domain}-rct"}],
    }
    if gated:
        spec["schedulingGates"] = [{"name": PLACEMENT_GATE}]
    if node:
        spec["nodeSelector"] = {HOSTNAME_LABEL: node}
    await client.create(
        PODS,
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec},
        namespace=namespace,
    )
    if placed is not None:
        await client.patch(
            PODS,
            name,
            {"status": {"conditions": [condition(PLACED_CONDITION, *placed)]}},
            namespace=namespace,
            subresource="status",
        )


async def event(
    client: KubeClient,
    namespace: str,
    *,
    kind: str,
    name: str,
    reason: str,
    message: str,
    type_: str = "Warning",
    when: str = T,
) -> None:
    await client.create(
        EVENTS,
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{reason.lower()}", "namespace": namespace},
            "involvedObject": {"kind": kind, "name": name, "namespace": namespace},
            "type": type_,
            "reason": reason,
            "message": message,
            "lastTimestamp": when,
            "firstTimestamp": when,
            "count": 1,
        },
        namespace=namespace,
    )
