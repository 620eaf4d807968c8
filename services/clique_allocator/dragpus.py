"""GPUs through NVIDIA's GPU DRA driver (``gpu.nvidia.com``): what nodes publish, what is taken
outside the allocator's records, and how many GPUs a pod's claims ask for (pure functions).

- **published**: per node, the whole-GPU devices (attribute ``type`` = ``gpu``) of the driver's
  ResourceSlices for that node, newest pool generation only;
- **tainted**: published devices that carry a ``NoSchedule`` or ``NoExecute`` taint, in their
  slice or from a DeviceTaintRule whose selector picks them (a rule without a selector picks
  none, an empty one every device); the scheduler gives them to no new claim;
- **claimed**: devices of the driver allocated to a claim the allocator does not account for
  (``accounted`` says which: claims of pods a Placement seats). The node is the slice's for the
  device's pool.

A pod's DRA GPUs: over its claims (from a ResourceClaimTemplate or a ResourceClaim), the
requests ``exactly`` of deviceClassName ``gpu.nvidia.com``: ``count`` devices (1 by default)
with allocationMode ``ExactCount``; every GPU of the node with ``All`` (:attr:`PodGpus.whole_node`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import msgspec

from shared.crds.gpuclaims import claim_spec_gpus
from shared.crds.names import GPU_DEVICE_TYPE, GPU_DRA_DRIVER, GPU_RESOURCE
from shared.kube.models import (
    DeviceTaint,
    DeviceTaintRule,
    Pod,
    ResourceClaim,
    ResourceSlice,
)

BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
Device = tuple[str, str]
"""(pool, device) of the GPU driver."""


class NodeDraGpus(msgspec.Struct, frozen=True, kw_only=True):
    """A node's DRA GPUs: how many it publishes, and which of them are not free."""

    published: int = 0
    tainted: int = 0
    claimed: int = 0
    """Free of taints but allocated to claims outside the records."""

    @property
    def unavailable(self) -> int:
        return self.tainted + self.claimed


def _newest(slices: Iterable[ResourceSlice]) -> list[ResourceSlice]:
    """The driver's node-local slices of the newest generation of each pool."""
    ours = [s for s in slices if s.spec.driver == GPU_DRA_DRIVER and s.spec.node_name]
    newest: dict[str, int] = {}
    for item in ours:
        pool = item.spec.pool
        newest[pool.name] = max(newest.get(pool.name, 0), pool.generation)
    return [s for s in ours if s.spec.pool.generation == newest[s.spec.pool.name]]


def _blocks(taint: DeviceTaint) -> bool:
    return taint.effect in BLOCKING_EFFECTS


def _rule_picks(rule: DeviceTaintRule, pool: str, device: str) -> bool:
    selector = rule.spec.device_selector
    if selector is None or not _blocks(rule.spec.taint):
        return False
    return (
        selector.driver in (None, GPU_DRA_DRIVER)
        and selector.pool in (None, pool)
        and selector.device in (None, device)
    )


def dra_gpus(
    slices: Iterable[ResourceSlice],
    rules: Iterable[DeviceTaintRule],
    claims: Iterable[ResourceClaim],
    *,
    accounted: Callable[[ResourceClaim], bool],
) -> dict[str, NodeDraGpus]:
    """Per node that publishes DRA GPUs, its counts (see the module docstring)."""
    rules = list(rules)
    node_of: dict[Device, str] = {}
    tainted: set[Device] = set()
    for item in _newest(slices):
        pool = item.spec.pool.name
        for device in item.spec.devices:
            kind = device.attributes.get("type")
            if kind is None or kind.string != GPU_DEVICE_TYPE:
                continue
            ref = (pool, device.name)
            node_of[ref] = item.spec.node_name
            if any(_blocks(t) for t in device.taints) or any(
                _rule_picks(rule, pool, device.name) for rule in rules
            ):
                tainted.add(ref)
    claimed = {
        ref
        for claim in claims
        if not accounted(claim)
        for ref in allocated_gpus(claim)
        if ref in node_of and ref not in tainted
    }
    counts: dict[str, list[int]] = {}
    for ref, node in node_of.items():
        entry = counts.setdefault(node, [0, 0, 0])
        entry[0] += 1
        entry[1] += ref in tainted
        entry[2] += ref in claimed
    return {
        node: NodeDraGpus(published=p, tainted=t, claimed=c) for node, (p, t, c) in counts.items()
    }


def allocated_gpus(claim: ResourceClaim) -> list[Device]:
    """The GPU driver's devices allocated to ``claim``."""
    allocation = claim.status.allocation
    if allocation is None:
        return []
    return [
        (result.pool, result.device)
        for result in allocation.devices.results
        if result.driver == GPU_DRA_DRIVER
    ]


class PodGpus(msgspec.Struct, frozen=True, kw_only=True):
    """The GPUs a pod asks for, through the device plugin and through DRA claims."""

    device_plugin: int = 0
    dra: int = 0
    whole_node: bool = False
    """A claim asks for every GPU of the node (allocationMode ``All``)."""
    unknown: bool = False
    """Some claim's spec is not known yet (its template or claim is not in the cache)."""

    @property
    def uses_dra(self) -> bool:
        return self.dra > 0 or self.whole_node

    @property
    def channel_only(self) -> bool:
        """The pod asks for no GPU at all, as far as every one of its claims is known."""
        return not self.unknown and not self.device_plugin and not self.uses_dra

    def total(self, node_gpus: int) -> int:
        """GPUs the pod takes on a node of ``node_gpus`` GPUs."""
        return node_gpus if self.whole_node else self.device_plugin + self.dra


ClaimSpecLookup = Callable[[str, str, bool], Mapping[str, Any] | None]
"""(namespace, name, from a template) -> the claim spec, or None when unknown."""


def pod_gpus(pod: Pod, claim_spec: ClaimSpecLookup) -> PodGpus:
    """The GPUs ``pod`` asks for; claims whose spec is not known count for none (and make
    the answer ``unknown``)."""
    count, whole, unknown = 0, False, False
    for claim in pod.spec.resource_claims:
        template = claim.resource_claim_template_name
        name = template or claim.resource_claim_name
        if not name:
            continue
        spec = claim_spec(pod.metadata.namespace, name, template is not None)
        if spec is None:
            unknown = True
            continue
        more, all_of_node = claim_spec_gpus(spec)
        count += more
        whole = whole or all_of_node
    return PodGpus(
        device_plugin=pod.gpus(GPU_RESOURCE), dra=count, whole_node=whole, unknown=unknown
    )
