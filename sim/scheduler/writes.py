"""The request bodies the scheduler sends, built from its decisions (pure functions).

- a ``Binding`` for ``POST pods/<name>/binding``;
- a strategic merge patch of ``pods/<name>/status`` setting ``PodScheduled=False``;
- merge patches of ``resourceclaims/<name>/status`` that allocate and reserve a claim, or undo
  that; each carries the claim's resourceVersion, so a write based on a stale view is refused
  with a conflict instead of clobbering someone else's.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec

from shared.kube.models import ResourceClaimConsumerReference
from sim.scheduler.facts import PodFacts
from sim.scheduler.objects import AllocationResult, ClaimStatus, ResourceClaim

UNSCHEDULABLE_REASON = "Unschedulable"
SCHEDULER_ERROR_REASON = "SchedulerError"
PRE_BIND_DRA = 'running PreBind plugin "DynamicResources"'
BINDING = "binding rejected"


def binding(pod: PodFacts, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def _timestamp(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def not_scheduled_patch(reason: str, message: str, *, now: datetime) -> dict[str, Any]:
    """The pod's ``PodScheduled=False`` condition: ``Unschedulable`` (no node fits) or
    ``SchedulerError`` (a write after the decision failed)."""
    return {
        "status": {
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": reason,
                    "message": message,
                    "lastProbeTime": None,
                    "lastTransitionTime": _timestamp(now),
                }
            ]
        }
    }


def consumer(pod: PodFacts) -> ResourceClaimConsumerReference:
    return ResourceClaimConsumerReference(resource="pods", name=pod.name, uid=pod.uid)


def reserved(
    claim: ResourceClaim, pod: PodFacts, allocation: AllocationResult | None
) -> ResourceClaim:
    """``claim`` as it is once allocated (when ``allocation`` is given) and reserved for ``pod``."""
    status = claim.status
    reserved_for = status.reserved_for
    if not any(r.uid == pod.uid for r in reserved_for):
        reserved_for = (*reserved_for, consumer(pod))
    return msgspec.structs.replace(
        claim,
        status=ClaimStatus(
            allocation=allocation if allocation is not None else status.allocation,
            reserved_for=reserved_for,
        ),
    )


def _json(value: msgspec.Struct) -> Any:
    """A Struct as plain JSON values (lists, not tuples), with the API's field names."""
    return msgspec.json.decode(msgspec.json.encode(value))


def _consumers(refs: tuple[ResourceClaimConsumerReference, ...]) -> list[dict[str, str]]:
    return [
        {"resource": r.resource, "name": r.name, "uid": r.uid}
        | ({"apiGroup": r.api_group} if r.api_group else {})
        for r in refs
    ]


def claim_status_patch(claim: ResourceClaim, *, base_version: str) -> dict[str, Any]:
    """Write ``claim``'s allocation and reservations over the version ``base_version``."""
    status: dict[str, Any] = {"reservedFor": _consumers(claim.status.reserved_for) or None}
    if claim.status.allocation is not None:
        status["allocation"] = _json(claim.status.allocation)
    return {"metadata": {"resourceVersion": base_version}, "status": status}


def claim_release_patch(
    claim: ResourceClaim, *, pod_uid: str, deallocate: bool
) -> dict[str, Any] | None:
    """Take ``pod`` out of the claim's reservations (and drop the allocation when
    ``deallocate`` and nobody else holds it); None when there is nothing to undo."""
    remaining = tuple(r for r in claim.status.reserved_for if r.uid != pod_uid)
    drop_allocation = deallocate and not remaining and claim.status.allocation is not None
    if len(remaining) == len(claim.status.reserved_for) and not drop_allocation:
        return None
    status: dict[str, Any] = {"reservedFor": _consumers(remaining) or None}
    if drop_allocation:
        status["allocation"] = None
    return {"metadata": {"resourceVersion": claim.metadata.resource_version}, "status": status}
