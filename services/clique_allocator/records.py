"""The Placement object as the allocator's durable record, and the engine's view of it.

A Placement (same namespace and name as its domain, owner reference to it) says, per member
node, how many GPUs the domain holds there (``gpus``, a multiple of ``gpusPerPod``: that many
pod slots) and which pods are pinned to it (``pods``). Slots without a pod are reserved for pods
still to come. Because the record is written before any pod is pinned, an allocator that
restarts finds every slot it gave out and every pod it promised to a node: it rebuilds its
reservations from Placements alone and never books a slot twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from services.clique_allocator.placement import NodeShare, Reservation
from shared.crds.computedomain import ComputeDomain
from shared.crds.definitions import COMPUTE_DOMAINS, PLACEMENTS
from shared.crds.placement import Placement, PlacementMember, PlacementSpec

FOREIGN = "~foreign"
"""Pseudo domain holding the GPUs of pods no Placement accounts for; never a namespace/name."""


def owned_by(placement: Placement, domain: ComputeDomain) -> bool:
    """The Placement belongs to this incarnation of the domain (not to an earlier namesake)."""
    owners = [ref.uid for ref in placement.metadata.owner_references if ref.kind == "ComputeDomain"]
    return not owners or domain.metadata.uid in owners


def slots_by_node(spec: PlacementSpec) -> dict[str, int]:
    """Pod slots per member node."""
    return {
        member.node: member.gpus // spec.gpus_per_pod
        for member in spec.members
        if member.gpus >= spec.gpus_per_pod
    }


def reservation_of(domain: str, spec: PlacementSpec) -> Reservation:
    """The engine's reservation for a recorded Placement."""
    return Reservation(
        domain=domain,
        clique=spec.clique,
        channel=spec.channel,
        gpus_per_pod=spec.gpus_per_pod,
        shares=tuple(
            NodeShare(node=node, pods=slots) for node, slots in slots_by_node(spec).items()
        ),
    )


def foreign_reservation(gpus_by_node: Mapping[str, int]) -> Reservation | None:
    """GPUs held by pods outside every Placement, as one reservation in no clique."""
    shares = tuple(
        NodeShare(node=node, pods=gpus) for node, gpus in sorted(gpus_by_node.items()) if gpus > 0
    )
    if not shares:
        return None
    return Reservation(domain=FOREIGN, clique="", channel=0, gpus_per_pod=1, shares=shares)


def record_of(
    reservation: Reservation,
    *,
    size: int,
    pods_by_node: Mapping[str, Iterable[str]],
    slots: Mapping[str, int],
) -> PlacementSpec:
    """The Placement spec for ``reservation`` with ``pods_by_node`` pinned, in slot order."""
    members = [
        PlacementMember(
            node=share.node,
            slot=slots.get(share.node, 0),
            gpus=share.pods * reservation.gpus_per_pod,
            pods=tuple(sorted(pods_by_node.get(share.node, ()))),
        )
        for share in reservation.shares
    ]
    members.sort(key=lambda member: (member.slot, member.node))
    return PlacementSpec(
        clique=reservation.clique,
        channel=reservation.channel,
        gpus_per_pod=reservation.gpus_per_pod,
        size=size,
        members=tuple(members),
    )


def placement_manifest(
    domain: ComputeDomain,
    spec: PlacementSpec,
    *,
    resource_version: str = "",
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The whole Placement object, for create or replace."""
    metadata: dict[str, Any] = {
        "name": domain.metadata.name,
        "namespace": domain.metadata.namespace,
        "labels": {"app.kubernetes.io/managed-by": "cdo-clique-allocator"},
        "ownerReferences": [
            {
                "apiVersion": COMPUTE_DOMAINS.api_version,
                "kind": COMPUTE_DOMAINS.kind,
                "name": domain.metadata.name,
                "uid": domain.metadata.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if resource_version:
        metadata["resourceVersion"] = resource_version
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": PLACEMENTS.api_version,
        "kind": PLACEMENTS.kind,
        "metadata": metadata,
        "spec": {
            "clique": spec.clique,
            "channel": spec.channel,
            "gpusPerPod": spec.gpus_per_pod,
            "size": spec.size,
            "members": [
                {"node": m.node, "slot": m.slot, "gpus": m.gpus, "pods": list(m.pods)}
                for m in spec.members
            ],
        },
    }
