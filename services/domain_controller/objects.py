"""The slices of pods and nodes the domain controller keeps in its caches.

A cluster can hold tens of thousands of pods and thousands of nodes; decoding only the fields the
controller reads keeps both the relist time and the cache's memory small.
"""

from __future__ import annotations

import msgspec

from shared.kube.meta import KubeObject


class _Camel(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    pass


class PodClaim(_Camel, frozen=True, kw_only=True):
    name: str
    resource_claim_template_name: str | None = None


class DomainPodSpec(_Camel, frozen=True, kw_only=True):
    node_name: str = ""
    resource_claims: tuple[PodClaim, ...] = ()


class DomainPodStatus(_Camel, frozen=True, kw_only=True):
    phase: str = ""


class DomainPod(KubeObject, frozen=True, kw_only=True):
    """A pod as far as domain membership goes: its node, its phase, the templates it uses."""

    spec: DomainPodSpec = msgspec.field(default_factory=DomainPodSpec)
    status: DomainPodStatus = msgspec.field(default_factory=DomainPodStatus)

    def template_keys(self) -> list[str]:
        """``namespace/template`` of every ResourceClaimTemplate the pod's claims come from."""
        namespace = self.metadata.namespace
        return [
            f"{namespace}/{claim.resource_claim_template_name}"
            for claim in self.spec.resource_claims
            if claim.resource_claim_template_name
        ]


class NodeCondition(_Camel, frozen=True, kw_only=True):
    type: str
    status: str
    reason: str = ""
    message: str = ""


class NodeTaint(_Camel, frozen=True, kw_only=True):
    key: str
    effect: str
    value: str = ""


class NodeAddress(_Camel, frozen=True, kw_only=True):
    type: str
    address: str


class DomainNodeSpec(_Camel, frozen=True, kw_only=True):
    taints: tuple[NodeTaint, ...] = ()


class DomainNodeStatus(_Camel, frozen=True, kw_only=True):
    conditions: tuple[NodeCondition, ...] = ()
    addresses: tuple[NodeAddress, ...] = ()


class DomainNode(KubeObject, frozen=True, kw_only=True):
    """A node as far as domain health goes: conditions, taints, addresses."""

    spec: DomainNodeSpec = msgspec.field(default_factory=DomainNodeSpec)
    status: DomainNodeStatus = msgspec.field(default_factory=DomainNodeStatus)

    def condition(self, kind: str) -> NodeCondition | None:
        return next((c for c in self.status.conditions if c.type == kind), None)

    @property
    def internal_ip(self) -> str:
        return next((a.address for a in self.status.addresses if a.type == "InternalIP"), "")
