"""The API objects the scheduler reads, decoded with msgspec into the fields it uses.

The shared Structs (:mod:`shared.kube.models`) keep claim specs as plain dicts; the scheduler
needs them typed, so the richer kinds are declared here. Nodes, taints, tolerations,
conditions, scheduling gates, selectors and affinity (:mod:`shared.kube.affinity`) are the
shared ones.
"""

from __future__ import annotations

from typing import Any

import msgspec

from shared.kube.affinity import (
    Affinity,
    LabelSelector,
    LabelSelectorRequirement,
    NodeAffinity,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodAffinity,
    PodAffinityTerm,
)
from shared.kube.meta import KubeObject
from shared.kube.models import (
    Condition,
    DeviceTaint,
    PodResourceClaim,
    PodResourceClaimStatus,
    ResourceClaimConsumerReference,
    SchedulingGate,
    Toleration,
)


class _Camel(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    pass


# -- pods --------------------------------------------------------------------------------------


class Resources(_Camel, frozen=True, kw_only=True):
    requests: dict[str, str] = msgspec.field(default_factory=dict)
    limits: dict[str, str] = msgspec.field(default_factory=dict)


class Container(_Camel, frozen=True, kw_only=True):
    name: str = ""
    resources: Resources = msgspec.field(default_factory=Resources)


class PodSpec(_Camel, frozen=True, kw_only=True):
    node_name: str = ""
    scheduler_name: str = "default-scheduler"
    node_selector: dict[str, str] = msgspec.field(default_factory=dict)
    scheduling_gates: tuple[SchedulingGate, ...] = ()
    resource_claims: tuple[PodResourceClaim, ...] = ()
    containers: tuple[Container, ...] = ()
    init_containers: tuple[Container, ...] = ()
    overhead: dict[str, str] = msgspec.field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    affinity: Affinity | None = None
    priority: int = 0


class PodStatus(_Camel, frozen=True, kw_only=True):
    phase: str = ""
    conditions: tuple[Condition, ...] = ()
    resource_claim_statuses: tuple[PodResourceClaimStatus, ...] = ()


class Pod(KubeObject, frozen=True, kw_only=True):
    """A pod as the scheduler reads it."""

    spec: PodSpec = msgspec.field(default_factory=PodSpec)
    status: PodStatus = msgspec.field(default_factory=PodStatus)

    @property
    def terminal(self) -> bool:
        return self.status.phase in ("Succeeded", "Failed")

    def condition(self, kind: str) -> Condition | None:
        return next((c for c in self.status.conditions if c.type == kind), None)


class Namespace(KubeObject, frozen=True, kw_only=True):
    """Only its labels matter (pod affinity's namespaceSelector)."""


# -- DRA (resource.k8s.io/v1) ---------------------------------------------------------------


class CelSelector(_Camel, frozen=True, kw_only=True):
    expression: str


class DeviceSelector(_Camel, frozen=True, kw_only=True):
    cel: CelSelector | None = None


class ExactDeviceRequest(_Camel, frozen=True, kw_only=True):
    device_class_name: str
    selectors: tuple[DeviceSelector, ...] = ()
    allocation_mode: str = "ExactCount"
    count: int = 1
    tolerations: tuple[Toleration, ...] = ()


class DeviceSubRequest(_Camel, frozen=True, kw_only=True):
    name: str
    device_class_name: str
    selectors: tuple[DeviceSelector, ...] = ()
    allocation_mode: str = "ExactCount"
    count: int = 1
    tolerations: tuple[Toleration, ...] = ()


class DeviceRequest(_Camel, frozen=True, kw_only=True):
    name: str
    exactly: ExactDeviceRequest | None = None
    first_available: tuple[DeviceSubRequest, ...] = ()


class DeviceConstraint(_Camel, frozen=True, kw_only=True):
    requests: tuple[str, ...] = ()
    match_attribute: str | None = None


class DeviceClaimConfiguration(_Camel, frozen=True, kw_only=True):
    requests: tuple[str, ...] = ()
    opaque: dict[str, Any] | None = None


class DeviceClaim(_Camel, frozen=True, kw_only=True):
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()
    config: tuple[DeviceClaimConfiguration, ...] = ()


class ClaimSpec(_Camel, frozen=True, kw_only=True):
    devices: DeviceClaim = msgspec.field(default_factory=DeviceClaim)


class DeviceRequestAllocationResult(_Camel, frozen=True, kw_only=True):
    request: str
    driver: str
    pool: str
    device: str


class DeviceAllocationConfiguration(_Camel, frozen=True, kw_only=True):
    source: str
    requests: tuple[str, ...] = ()
    opaque: dict[str, Any] | None = None


class DeviceAllocationResult(_Camel, frozen=True, kw_only=True):
    results: tuple[DeviceRequestAllocationResult, ...] = ()
    config: tuple[DeviceAllocationConfiguration, ...] = ()


class AllocationResult(_Camel, frozen=True, kw_only=True):
    devices: DeviceAllocationResult = msgspec.field(default_factory=DeviceAllocationResult)
    node_selector: NodeSelector | None = None


class ClaimStatus(_Camel, frozen=True, kw_only=True):
    allocation: AllocationResult | None = None
    reserved_for: tuple[ResourceClaimConsumerReference, ...] = ()


class ResourceClaim(KubeObject, frozen=True, kw_only=True):
    spec: ClaimSpec = msgspec.field(default_factory=ClaimSpec)
    status: ClaimStatus = msgspec.field(default_factory=ClaimStatus)


class DeviceClassConfiguration(_Camel, frozen=True, kw_only=True):
    opaque: dict[str, Any] | None = None


class DeviceClassSpec(_Camel, frozen=True, kw_only=True):
    selectors: tuple[DeviceSelector, ...] = ()
    config: tuple[DeviceClassConfiguration, ...] = ()


class DeviceClass(KubeObject, frozen=True, kw_only=True):
    spec: DeviceClassSpec = msgspec.field(default_factory=DeviceClassSpec)


class DeviceAttribute(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One typed attribute value. The wire names ``int`` and ``bool`` would shadow the builtins
    in the class body (and break evaluating the annotations), hence the Python names."""

    string: str | None = None
    integer: int | None = msgspec.field(default=None, name="int")
    boolean: bool | None = msgspec.field(default=None, name="bool")
    version: str | None = None


AttributeValue = str | int | bool


def attribute_value(attribute: DeviceAttribute) -> AttributeValue | None:
    """The one value an attribute sets (a ``version`` as its text)."""
    for value in (attribute.string, attribute.integer, attribute.boolean, attribute.version):
        if value is not None:
            return value
    return None


class DeviceCapacity(_Camel, frozen=True, kw_only=True):
    value: str


class Device(_Camel, frozen=True, kw_only=True):
    name: str
    attributes: dict[str, DeviceAttribute] = msgspec.field(default_factory=dict)
    capacity: dict[str, DeviceCapacity] = msgspec.field(default_factory=dict)
    taints: tuple[DeviceTaint, ...] = ()


class ResourcePool(_Camel, frozen=True, kw_only=True):
    name: str
    generation: int = 0
    resource_slice_count: int = 1


class ResourceSliceSpec(_Camel, frozen=True, kw_only=True):
    driver: str
    pool: ResourcePool
    node_name: str = ""
    node_selector: NodeSelector | None = None
    all_nodes: bool = False
    devices: tuple[Device, ...] = ()


class ResourceSlice(KubeObject, frozen=True, kw_only=True):
    spec: ResourceSliceSpec


__all__ = [
    "Affinity",
    "LabelSelector",
    "LabelSelectorRequirement",
    "NodeAffinity",
    "NodeSelector",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "PodAffinity",
    "PodAffinityTerm",
]
