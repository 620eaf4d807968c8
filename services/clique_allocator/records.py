"""The Placement object as the allocator's durable record: ownership, the whole object, and the
pseudo reservation of GPUs held outside every record.

A Placement (same namespace and name as its domain, owner reference to it) says, per slice and
member node, how many GPUs the domain holds there (``gpus``, a multiple of ``gpusPerPod``: that
many pod slots) and which pods are pinned to it with their ranks (``pods``). Slots without a pod
are reserved for pods still to come. Because the record is written before any pod is pinned, an
allocator that restarts finds every slot it gave out and every pod it promised to a node: it
rebuilds its reservations from Placements alone (``planning/slices.py``) and never books a slot
twice. The object is written in the slice shape only (:func:`spec_body`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from services.clique_allocator.placement import NodeShare, Reservation
from shared.crds.computedomain import ComputeDomain
from shared.crds.definitions import COMPUTE_DOMAINS, PLACEMENTS
from shared.crds.placement import Placement, PlacementSpec

FOREIGN = "~foreign"
"""Pseudo domain holding the GPUs of pods no Placement accounts for; never a namespace/name."""


def owned_by(placement: Placement, domain: ComputeDomain) -> bool:
    """The Placement belongs to this incarnation of the domain (not to an earlier namesake)."""
    owners = [ref.uid for ref in placement.metadata.owner_references if ref.kind == "ComputeDomain"]
    return not owners or domain.metadata.uid in owners


def foreign_reservation(gpus_by_node: Mapping[str, int]) -> Reservation | None:
    """GPUs held by pods outside every Placement, as one reservation in no clique."""
    shares = tuple(
        NodeShare(node=node, pods=gpus) for node, gpus in sorted(gpus_by_node.items()) if gpus > 0
    )
    if not shares:
        return None
    return Reservation(domain=FOREIGN, clique="", channel=0, gpus_per_pod=1, shares=shares)


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
        "spec": spec_body(spec),
    }


LEGACY_FIELDS = ("clique", "channel", "members")


def spec_body(spec: PlacementSpec) -> dict[str, Any]:
    """The spec as written: the slice shape, without the first release's fields or nulls."""
    body: dict[str, Any] = _without_nulls(msgspec.to_builtins(spec))
    for name in LEGACY_FIELDS:
        body.pop(name, None)
    if not body.get("evicting"):
        body.pop("evicting", None)
    if body.get("multiNodeNvlink") is True:
        body.pop("multiNodeNvlink")  # the default: records of domains in cliques read as before
    # Without pods that ask only for the channel, a record reads as it did before they existed.
    if not body.get("channelOnly"):
        body.pop("channelOnly", None)
    for piece in body.get("slices", ()):
        for member in piece.get("members", ()):
            if not member.get("channelOnlyPods"):
                member.pop("channelOnlyPods", None)
    return body


def _without_nulls(value: Any) -> Any:
    """``value`` with every null field left out, at every depth (the schema has no nullables)."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value
