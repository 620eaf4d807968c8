"""Channel attachment devices: how many each node publishes, and who holds them (pure).

Every pod that gets a domain's IMEX channel takes one attachment device of its node: the IMEX
agent publishes ``attach-0`` .. ``attach-<N-1>`` in the node's ResourceSlice of driver
``compute-domain.cdo.dev`` (``services/imex_agent/resourceslice.py``), and the scheduler
allocates one to each pod's channel claim. A pod pinned to a node without a free one stays
Pending, so the allocator counts them:

- **published**: per node, the devices of the driver's slice for that node, newest pool
  generation only. A node whose slice the allocator has not seen has no count (``None``): it is
  not limited by attachments (the scheduler waits for the slice, as before);
- **held**: per node, who holds a device: every pod slot and pod a Placement records there
  (with GPUs or without: a seat holds its device from the moment it is recorded, before the
  scheduler allocates it), and every claim that has one of the driver's devices there
  allocated and belongs to no recorded pod (a pod's claim made from a template counts as its
  pod, so a seated pod is counted once). ``usage.py`` keeps the count per node and per domain.
"""

from __future__ import annotations

from collections.abc import Iterable

from services.clique_allocator.objects import claim_owner
from shared.crds.names import DRIVER_NAME
from shared.kube.models import ResourceClaim, ResourceSlice


def published_attachments(slices: Iterable[ResourceSlice]) -> dict[str, int]:
    """Per node, the attachment devices its newest slice of the driver lists."""
    ours = [s for s in slices if s.spec.driver == DRIVER_NAME and s.spec.node_name]
    newest: dict[str, int] = {}
    for item in ours:
        pool = item.spec.pool
        newest[pool.name] = max(newest.get(pool.name, 0), pool.generation)
    counts: dict[str, int] = {}
    for item in ours:
        if item.spec.pool.generation == newest[item.spec.pool.name]:
            node = item.spec.node_name
            counts[node] = counts.get(node, 0) + len(item.spec.devices)
    return counts


def attachment_nodes(claim: ResourceClaim) -> list[str]:
    """The nodes (pools) where ``claim`` has devices of the driver allocated."""
    allocation = claim.status.allocation
    if allocation is None:
        return []
    return sorted(
        {result.pool for result in allocation.devices.results if result.driver == DRIVER_NAME}
    )


def claim_holder(claim: ResourceClaim) -> str:
    """Who holds the claim's device: ``namespace/pod`` for a pod's claim made from a template,
    else the claim itself (``claim:namespace/name``)."""
    owner = claim_owner(claim)
    if owner is not None:
        return f"{owner[0]}/{owner[1]}"
    return f"claim:{claim.metadata.namespace}/{claim.metadata.name}"


def claim_holders(claims: Iterable[ResourceClaim]) -> dict[str, set[str]]:
    """Per node, the holders (:func:`claim_holder`) of the driver's devices allocated there."""
    holders: dict[str, set[str]] = {}
    for claim in claims:
        for node in attachment_nodes(claim):
            holders.setdefault(node, set()).add(claim_holder(claim))
    return holders
