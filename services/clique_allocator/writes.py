"""The allocator's writes: Placements, pod pins and gates, pod conditions.

- A Placement is created whole, replaced conditionally on the resourceVersion it was computed
  from (a change by anyone else fails with 409 and is looked at again), and deleted with the uid
  it had, so a successor of the same name is never deleted.
- A pin is one merge patch per pod: ``spec.nodeSelector["kubernetes.io/hostname"]`` and the
  scheduling gates less ``cdo.dev/placement``, conditional on the pod's uid (a successor of the
  same name is never pinned by its predecessor's seat). Gates can only be removed after creation,
  so the patch cannot take away a gate someone else added; and the API lets a pod's nodeSelector
  only grow while it is gated, so once one pin has ungated a pod no later pin (of a replica
  that led before) can move it; a pod that is gone is skipped.
- Annotations of a Placement are merged conditionally on its resourceVersion, like its
  replacement.
- Every Placement write carries ``cdo.dev/written-by``: the allocator's own user (its ``user``
  setting). The ``cdo-placement-writer`` admission policy refuses a Placement write by anyone
  else and one whose annotation is not the writer's user, and the IMEX agent grants a channel
  only from a Placement whose annotation is the allocator's (docs/security.md, "Placements").
- The ``cdo.dev/Placed`` condition is a strategic merge patch of the pod's status, merged by
  type, so the kubelet's and the scheduler's conditions stay.
- An eviction (a pod of a slice that failed over) goes through the Eviction API
  (``pods/<name>/eviction``), so the pod's PodDisruptionBudget holds: a 429 answer means "not
  now", and the pod is tried again at the next reconcile; a pod that is gone counts as evicted.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import msgspec

from services.clique_allocator.records import placement_manifest
from shared.crds.computedomain import ComputeDomain
from shared.crds.definitions import PLACEMENTS
from shared.crds.names import (
    HOSTNAME_LABEL,
    PLACED_CONDITION,
    PLACEMENT_GATE,
    WRITTEN_BY_ANNOTATION,
)
from shared.crds.placement import Placement, PlacementSpec
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.models import Pod
from shared.kube.resources import PODS

_decode_placement = msgspec.json.Decoder(Placement)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pin_patch(pod: Pod, node: str) -> dict[str, Any]:
    """The merge patch that pins ``pod`` to ``node`` and removes the allocator's gate (only
    removes the gate when ``node`` is "": the scheduler chooses)."""
    remaining = [
        {"name": gate.name} for gate in pod.spec.scheduling_gates if gate.name != PLACEMENT_GATE
    ]
    # null removes the field: the API drops an empty gate list the same way
    spec: dict[str, Any] = {"schedulingGates": remaining or None}
    if node:
        spec["nodeSelector"] = {HOSTNAME_LABEL: node}
    if not pod.metadata.uid:
        return {"spec": spec}
    return {"metadata": {"uid": pod.metadata.uid}, "spec": spec}


def condition_patch(*, status: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "status": {
            "conditions": [
                {
                    "type": PLACED_CONDITION,
                    "status": status,
                    "reason": reason,
                    "message": message,
                    "lastTransitionTime": _now(),
                }
            ]
        }
    }


class AllocatorWrites:
    def __init__(self, client: KubeClient, *, field_manager: str, user: str) -> None:
        self._client = client
        self._manager = field_manager
        self._user = user

    def _stamped(self, annotations: Mapping[str, str] | None) -> dict[str, str]:
        return {**(annotations or {}), WRITTEN_BY_ANNOTATION: self._user}

    def stamped(self, placement: Placement) -> bool:
        """Whether ``placement`` carries this allocator's user as its last writer."""
        return placement.metadata.annotations.get(WRITTEN_BY_ANNOTATION) == self._user

    async def create_placement(
        self,
        domain: ComputeDomain,
        spec: PlacementSpec,
        *,
        annotations: Mapping[str, str] | None = None,
    ) -> Placement:
        raw = await self._client.create(
            PLACEMENTS,
            placement_manifest(domain, spec, annotations=self._stamped(annotations)),
            namespace=domain.metadata.namespace,
        )
        return _decode_placement.decode(raw)

    async def replace_placement(
        self,
        domain: ComputeDomain,
        spec: PlacementSpec,
        *,
        resource_version: str,
        annotations: Mapping[str, str] | None = None,
    ) -> Placement:
        raw = await self._client.replace(
            PLACEMENTS,
            domain.metadata.name,
            placement_manifest(
                domain,
                spec,
                resource_version=resource_version,
                annotations=self._stamped(annotations),
            ),
            namespace=domain.metadata.namespace,
        )
        return _decode_placement.decode(raw)

    async def annotate_placement(
        self, placement: Placement, annotations: Mapping[str, str | None]
    ) -> Placement:
        """Merge-patch the given annotations of ``placement`` (None removes one), and the
        writer's."""
        metadata = {
            "annotations": {**annotations, WRITTEN_BY_ANNOTATION: self._user},
            "resourceVersion": placement.metadata.resource_version,
        }
        raw = await self._client.patch(
            PLACEMENTS,
            placement.metadata.name,
            {"metadata": metadata},
            namespace=placement.metadata.namespace,
            field_manager=self._manager,
        )
        return _decode_placement.decode(raw)

    async def get_placement(self, *, namespace: str, name: str) -> Placement | None:
        raw = await self._client.get_or_none(PLACEMENTS, name, namespace=namespace)
        return None if raw is None else _decode_placement.decode(raw)

    async def delete_placement(self, *, namespace: str, name: str, uid: str) -> bool:
        try:
            return await self._client.delete(PLACEMENTS, name, namespace=namespace, uid=uid)
        except KubeApiError as exc:
            if exc.conflict:  # the uid precondition failed: a successor, not ours to delete
                return False
            raise

    async def pin(self, pod: Pod, node: str) -> bool:
        """Pin and ungate; False when the pod is gone or another of its name is there now."""
        try:
            await self._client.patch(
                PODS,
                pod.metadata.name,
                pin_patch(pod, node),
                namespace=pod.metadata.namespace,
                field_manager=self._manager,
            )
        except KubeApiError as exc:
            if exc.not_found or exc.conflict:
                return False
            raise
        return True

    async def evict(self, pod: Pod) -> bool:
        """Evict ``pod`` through the Eviction API; False when a disruption budget refused it."""
        meta = pod.metadata
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": meta.name, "namespace": meta.namespace},
            "deleteOptions": {"preconditions": {"uid": meta.uid}},
        }
        try:
            await self._client.create(
                PODS, body, namespace=meta.namespace, name=meta.name, subresource="eviction"
            )
        except KubeApiError as exc:
            if exc.not_found or exc.conflict:  # gone, or another pod of that name now
                return True
            if exc.code == 429:
                return False
            raise
        return True

    async def set_condition(self, pod: Pod, *, status: str, reason: str, message: str) -> None:
        try:
            await self._client.patch(
                PODS,
                pod.metadata.name,
                condition_patch(status=status, reason=reason, message=message),
                namespace=pod.metadata.namespace,
                subresource="status",
                patch_type="strategic",
                field_manager=self._manager,
            )
        except KubeApiError as exc:
            if not exc.not_found:
                raise
