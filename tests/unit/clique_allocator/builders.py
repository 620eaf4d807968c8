"""Small builders of API objects and views for the allocator's unit tables."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from services.clique_allocator.nodes import build_cliques, node_facts
from services.clique_allocator.objects import Workload
from services.clique_allocator.placement import ClusterView, Reservation
from services.clique_allocator.planning.unitrecords import recorded_reservations
from shared.crds.computedomain import ComputeDomain
from shared.crds.placement import (
    LegacyMember,
    PlacedPod,
    PlacementSlice,
    PlacementSpec,
    SliceMember,
)
from shared.kube.models import Node, Pod

CLIQUE_A = "0f6d1c1e-8c1d-4bb7-9d49-3f1e0f0c2a00.1"
CLIQUE_B = "0f6d1c1e-8c1d-4bb7-9d49-3f1e0f0c2a01.1"
NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)


def node(
    name: str,
    *,
    clique: str | None = CLIQUE_A,
    gpus: int = 4,
    ready: str = "True",
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    annotations: dict[str, str] | None = None,
    conditions: list[dict[str, str]] | None = None,
    labels: dict[str, str] | None = None,
    allocatable: dict[str, str] | None = None,
) -> Node:
    extra_labels = labels or {}
    labels = {"kubernetes.io/hostname": name, **extra_labels}
    if clique is not None:
        labels["nvidia.com/gpu.clique"] = clique
        labels["cdo.dev/nvlink-domain"] = clique.split(".")[0]
    body: dict[str, Any] = {
        "metadata": {"name": name, "labels": labels, "annotations": annotations or {}},
        "spec": {"unschedulable": unschedulable, "taints": taints or []},
        "status": {
            "allocatable": {"nvidia.com/gpu": str(gpus), **(allocatable or {})},
            "conditions": [{"type": "Ready", "status": ready}, *(conditions or [])],
        },
    }
    return msgspec.convert(body, type=Node)


def rack(prefix: str, clique: str, count: int = 4) -> list[Node]:
    return [node(f"{prefix}-n{i:02d}", clique=clique) for i in range(count)]


def pod(
    name: str,
    *,
    gpus: int = 4,
    gated: bool = True,
    template: str | None = "train-rct",
    phase: str = "Pending",
    node_name: str = "",
    pinned_to: str = "",
    owner: tuple[str, str, str] | None = ("ReplicaSet", "train-rs", "rs-uid"),
    deleting: bool = False,
    placed: tuple[str, str, str] | None = None,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    created: int = 0,
    uid: str = "",
    requests: dict[str, str] | None = None,
    spec_extra: dict[str, Any] | None = None,
) -> Pod:
    resources: dict[str, Any] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    if requests:
        resources["requests"] = requests
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "resources": resources}],
        "nodeName": node_name,
        **(spec_extra or {}),
    }
    if template is not None:
        spec["resourceClaims"] = [{"name": "channel", "resourceClaimTemplateName": template}]
    if gated:
        spec["schedulingGates"] = [{"name": "cdo.dev/placement"}]
    if pinned_to:
        spec["nodeSelector"] = {**spec.get("nodeSelector", {}), "kubernetes.io/hostname": pinned_to}
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid or f"{name}-uid",
        "labels": labels or {},
        "creationTimestamp": (NOW + timedelta(seconds=created)).isoformat(),
    }
    if owner is not None:
        kind, owner_name, uid = owner
        metadata["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": kind, "name": owner_name, "uid": uid,
             "controller": True}
        ]  # fmt: skip
    if deleting:
        metadata["deletionTimestamp"] = NOW.isoformat()
    status: dict[str, Any] = {"phase": phase}
    if placed is not None:
        status["conditions"] = [
            {"type": "cdo.dev/Placed", "status": placed[0], "reason": placed[1],
             "message": placed[2]}
        ]  # fmt: skip
    return msgspec.convert(
        {"metadata": metadata, "spec": spec, "status": status}, type=Pod, strict=False
    )


def domain(
    name: str = "train",
    *,
    uid: str = "cd-uid",
    gang: int | None = None,
    num_nodes: int | None = None,
    slice_size: int | None = None,
    spread: int | None = None,
    failover: dict[str, Any] | None = None,
    deleting: bool = False,
    unit_label: str | None = None,
) -> ComputeDomain:
    spec: dict[str, Any] = {"channel": {"resourceClaimTemplate": {"name": f"{name}-rct"}}}
    gang_spec: dict[str, Any] = {}
    if gang is not None:
        gang_spec["size"] = gang
    if slice_size is not None:
        gang_spec["sliceSize"] = slice_size
    if spread is not None:
        gang_spec["nodes"] = spread
    if unit_label is not None:
        gang_spec["unitLabel"] = unit_label
    if gang_spec:
        spec["gang"] = gang_spec
    if num_nodes is not None:
        spec["numNodes"] = num_nodes
    if failover is not None:
        spec["failover"] = failover
    metadata: dict[str, Any] = {"name": name, "namespace": "default", "uid": uid}
    if deleting:
        metadata["deletionTimestamp"] = NOW.isoformat()
    return msgspec.convert({"metadata": metadata, "spec": spec}, type=ComputeDomain)


def workload(
    *,
    replicas: int | None = None,
    uid: str = "rs-uid",
    succeeded: int = 0,
    labels: dict[str, str] | None = None,
    makes: str | None = None,
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> Workload:
    """A workload; ``makes``: the claim template its pods use; ``annotations``: its pod
    template's."""
    template: dict[str, Any] = {"metadata": {"annotations": annotations or {}}, "spec": {}}
    if makes is not None:
        template["spec"]["resourceClaims"] = [{"name": "c", "resourceClaimTemplateName": makes}]
    body: dict[str, Any] = {
        "metadata": {"uid": uid, "labels": labels or {}},
        "spec": {**spec, "template": template},
        "status": {"succeeded": succeeded},
    }
    if replicas is not None:
        body["spec"]["replicas"] = replicas
    return msgspec.convert(body, type=Workload)


def record(
    *members: tuple[str, int, tuple[str, ...]],
    clique: str = CLIQUE_A,
    channel: int = 0,
    gpus_per_pod: int = 4,
    size: int | None = None,
    slice_size: int | None = None,
) -> PlacementSpec:
    """A one-slice record: members as (node, slots, pods), ranks in member then pod order; node
    slots taken from the node name's index."""
    gang = sum(slots for _, slots, _ in members) if size is None else size
    piece = slice_of(*members, clique=clique, channel=channel, gpus_per_pod=gpus_per_pod, size=gang)
    return PlacementSpec(
        gpus_per_pod=gpus_per_pod, size=gang, slice_size=slice_size, slices=(piece,)
    )


def slice_of(
    *members: tuple[str, int, tuple[str, ...]],
    clique: str = CLIQUE_A,
    channel: int = 0,
    gpus_per_pod: int = 4,
    index: int = 0,
    first_rank: int = 0,
    size: int | None = None,
) -> PlacementSlice:
    """One slice: members as (node, slots, pods), ranks from ``first_rank`` in member order."""
    rank = first_rank
    built = []
    for name, slots, pods in members:
        placed = []
        for pod_name in pods:
            # The uid :func:`pod` gives a pod of that name, as the allocator records it.
            placed.append(PlacedPod(name=pod_name, rank=rank, uid=f"{pod_name}-uid"))
            rank += 1
        built.append(
            SliceMember(
                node=name,
                slot=int(name.rsplit("n", 1)[1]),
                gpus=slots * gpus_per_pod,
                pods=tuple(placed),
            )
        )
    return PlacementSlice(
        index=index,
        clique=clique,
        channel=channel,
        first_rank=first_rank,
        size=sum(slots for _, slots, _ in members) if size is None else size,
        members=tuple(built),
    )


def legacy_record(
    *members: tuple[str, int, tuple[str, ...]],
    clique: str = CLIQUE_A,
    channel: int = 0,
    gpus_per_pod: int = 4,
    size: int | None = None,
) -> PlacementSpec:
    """A record as the first release wrote it: one clique, pods as plain names."""
    return PlacementSpec(
        clique=clique,
        channel=channel,
        gpus_per_pod=gpus_per_pod,
        size=sum(slots for _, slots, _ in members) if size is None else size,
        members=tuple(
            LegacyMember(
                node=name, slot=int(name.rsplit("n", 1)[1]), gpus=slots * gpus_per_pod, pods=pods
            )
            for name, slots, pods in members
        ),
    )


def view(nodes: list[Node], **records: PlacementSpec) -> ClusterView:
    facts = [found for item in nodes if (found := node_facts(item)) is not None]
    reservations: list[Reservation] = [
        reservation
        for name, spec in records.items()
        for reservation in recorded_reservations(f"default/{name}", spec)
    ]
    return ClusterView.build(cliques=build_cliques(facts), reservations=reservations)
