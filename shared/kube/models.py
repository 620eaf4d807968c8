"""Structs of the built-in objects cdo's services and simulator read, with the fields they use.

Decoding ignores every field not declared here, so these stay small; code that needs more
declares a richer Struct of its own (subclassing where it helps). Writes are plain JSON patches.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from shared.kube.affinity import Affinity
from shared.kube.meta import KubeObject


class _Camel(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    pass


# -- common ----------------------------------------------------------------------------------


class Condition(_Camel, frozen=True, kw_only=True):
    type: str
    status: str
    reason: str = ""
    message: str = ""
    observed_generation: int = 0
    last_transition_time: datetime | None = None


class Taint(_Camel, frozen=True, kw_only=True):
    key: str
    effect: str
    value: str = ""
    # Set on NoExecute taints: when the taint was added, from which tolerationSeconds count.
    time_added: datetime | None = None


class Toleration(_Camel, frozen=True, kw_only=True):
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None


# -- pods --------------------------------------------------------------------------------------


class ResourceRequirements(_Camel, frozen=True, kw_only=True):
    requests: dict[str, str] = msgspec.field(default_factory=dict)
    limits: dict[str, str] = msgspec.field(default_factory=dict)
    claims: tuple[dict[str, str], ...] = ()


class Container(_Camel, frozen=True, kw_only=True):
    name: str
    image: str = ""
    resources: ResourceRequirements = msgspec.field(default_factory=ResourceRequirements)


class PodResourceClaim(_Camel, frozen=True, kw_only=True):
    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class SchedulingGate(_Camel, frozen=True, kw_only=True):
    name: str


class PodSpec(_Camel, frozen=True, kw_only=True):
    node_name: str = ""
    node_selector: dict[str, str] = msgspec.field(default_factory=dict)
    scheduling_gates: tuple[SchedulingGate, ...] = ()
    resource_claims: tuple[PodResourceClaim, ...] = ()
    containers: tuple[Container, ...] = ()
    init_containers: tuple[Container, ...] = ()
    overhead: dict[str, str] = msgspec.field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    affinity: Affinity | None = None
    priority: int = 0


class PodResourceClaimStatus(_Camel, frozen=True, kw_only=True):
    name: str
    resource_claim_name: str | None = None


class PodStatus(_Camel, frozen=True, kw_only=True):
    phase: str = ""
    conditions: tuple[Condition, ...] = ()
    resource_claim_statuses: tuple[PodResourceClaimStatus, ...] = ()
    reason: str = ""
    message: str = ""


class Pod(KubeObject, frozen=True, kw_only=True):
    spec: PodSpec = msgspec.field(default_factory=PodSpec)
    status: PodStatus = msgspec.field(default_factory=PodStatus)

    def gpus(self, resource: str = "nvidia.com/gpu") -> int:
        """GPUs the pod asks for (limits win, as for extended resources)."""
        total = 0
        for container in self.spec.containers:
            value = container.resources.limits.get(resource) or container.resources.requests.get(
                resource
            )
            total += int(value) if value else 0
        return total

    def condition(self, kind: str) -> Condition | None:
        return next((c for c in self.status.conditions if c.type == kind), None)


# -- nodes -----------------------------------------------------------------------------------


class NodeSpec(_Camel, frozen=True, kw_only=True):
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()


class NodeAddress(_Camel, frozen=True, kw_only=True):
    type: str
    address: str


class NodeSystemInfo(_Camel, frozen=True, kw_only=True):
    container_runtime_version: str = ""
    """``<runtime>://<version>``, e.g. ``containerd://2.1.4``, as the kubelet reports it."""
    kubelet_version: str = ""


class NodeStatus(_Camel, frozen=True, kw_only=True):
    capacity: dict[str, str] = msgspec.field(default_factory=dict)
    allocatable: dict[str, str] = msgspec.field(default_factory=dict)
    conditions: tuple[Condition, ...] = ()
    addresses: tuple[NodeAddress, ...] = ()
    node_info: NodeSystemInfo = msgspec.field(default_factory=NodeSystemInfo)


class Node(KubeObject, frozen=True, kw_only=True):
    spec: NodeSpec = msgspec.field(default_factory=NodeSpec)
    status: NodeStatus = msgspec.field(default_factory=NodeStatus)

    def condition(self, kind: str) -> Condition | None:
        return next((c for c in self.status.conditions if c.type == kind), None)

    @property
    def internal_ip(self) -> str:
        return next((a.address for a in self.status.addresses if a.type == "InternalIP"), "")


# -- DRA (resource.k8s.io/v1) ---------------------------------------------------------------


class DeviceRequestAllocationResult(_Camel, frozen=True, kw_only=True):
    request: str
    driver: str
    pool: str
    device: str


class DeviceAllocationResult(_Camel, frozen=True, kw_only=True):
    results: tuple[DeviceRequestAllocationResult, ...] = ()


class AllocationResult(_Camel, frozen=True, kw_only=True):
    devices: DeviceAllocationResult = msgspec.field(default_factory=DeviceAllocationResult)
    node_selector: dict[str, Any] | None = None


class ResourceClaimConsumerReference(_Camel, frozen=True, kw_only=True):
    resource: str
    name: str
    uid: str
    api_group: str = ""


class ResourceClaimStatus(_Camel, frozen=True, kw_only=True):
    allocation: AllocationResult | None = None
    reserved_for: tuple[ResourceClaimConsumerReference, ...] = ()


class ResourceClaim(KubeObject, frozen=True, kw_only=True):
    spec: dict[str, Any] = msgspec.field(default_factory=dict)
    status: ResourceClaimStatus = msgspec.field(default_factory=ResourceClaimStatus)


class ResourceClaimTemplate(KubeObject, frozen=True, kw_only=True):
    spec: dict[str, Any] = msgspec.field(default_factory=dict)


class DeviceAttribute(_Camel, frozen=True, kw_only=True):
    # Wire names ``int`` and ``bool`` would shadow the builtins inside the class body.
    string: str | None = None
    integer: int | None = msgspec.field(default=None, name="int")
    boolean: bool | None = msgspec.field(default=None, name="bool")
    version: str | None = None


class DeviceTaint(_Camel, frozen=True, kw_only=True):
    """A DRA device taint (KEP-5055): effect ``None``, ``NoSchedule`` or ``NoExecute``."""

    key: str
    value: str = ""
    effect: str = ""
    time_added: str = ""


class Device(_Camel, frozen=True, kw_only=True):
    name: str
    attributes: dict[str, DeviceAttribute] = msgspec.field(default_factory=dict)
    taints: tuple[DeviceTaint, ...] = ()


class ResourcePool(_Camel, frozen=True, kw_only=True):
    name: str
    generation: int = 0
    resource_slice_count: int = 1


class ResourceSliceSpec(_Camel, frozen=True, kw_only=True):
    driver: str
    pool: ResourcePool
    node_name: str = ""
    devices: tuple[Device, ...] = ()


class ResourceSlice(KubeObject, frozen=True, kw_only=True):
    spec: ResourceSliceSpec


class DeviceTaintSelector(_Camel, frozen=True, kw_only=True):
    """Which devices a DeviceTaintRule taints: every set field must match."""

    driver: str | None = None
    pool: str | None = None
    device: str | None = None


class DeviceTaintRuleSpec(_Camel, frozen=True, kw_only=True):
    taint: DeviceTaint
    device_selector: DeviceTaintSelector | None = None


class DeviceTaintRule(KubeObject, frozen=True, kw_only=True):
    spec: DeviceTaintRuleSpec
    status: dict[str, Any] = msgspec.field(default_factory=dict)  # conditions of the evictions


class DeviceClass(KubeObject, frozen=True, kw_only=True):
    spec: dict[str, Any] = msgspec.field(default_factory=dict)
