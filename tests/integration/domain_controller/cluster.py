"""Driving the cluster around a domain controller, as the other writers would.

The allocator writes Placements, the kubelet binds pods and reports their phase, the IMEX agent
reports ``cdo.dev/ImexReady`` on its node, the health monitor taints faulty nodes: this module
does each of those writes the way its real writer does, through the API.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import msgspec

from shared.bus import EventBus
from shared.crds import (
    COMPUTE_DOMAINS,
    COMPUTE_DOMAINS_V1BETA1,
    PLACEMENTS,
    ComputeDomain,
    DomainCondition,
)
from shared.crds.names import GPU_FAULT_TAINT, IMEX_READY_CONDITION
from shared.events import DomainMembershipChanged
from shared.events.subjects import DOMAIN_MEMBERSHIP, DOMAIN_SNAPSHOT
from shared.kube.client import KubeClient
from shared.kube.models import DeviceClass, ResourceClaimTemplate
from shared.kube.resources import (
    DEVICE_CLASSES,
    NODES,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    Resource,
)
from tests.support.eventlog import EventLog
from tests.support.kubeevents import CoreEvent, events_involving

NAMESPACE = "default"
CLIQUE = "0f6d1c1e-8c1d-4bb7-9d49-3f1e0f0c2a11.1"


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def domain_manifest(
    name: str, template: str, *, num_nodes: int | None = None, **spec: Any
) -> dict[str, Any]:
    """A ComputeDomain as v1beta2, or as v1beta1 when it has NVIDIA's older ``numNodes``."""
    resource = COMPUTE_DOMAINS if num_nodes is None else COMPUTE_DOMAINS_V1BETA1
    body: dict[str, Any] = {
        "apiVersion": resource.api_version,
        "kind": COMPUTE_DOMAINS.kind,
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"channel": {"resourceClaimTemplate": {"name": template}}, **spec},
    }
    if num_nodes is not None:
        body["spec"]["numNodes"] = num_nodes
    return body


def resource_of(body: dict[str, Any]) -> Resource:
    """The ComputeDomain version ``body`` is written in."""
    if body.get("apiVersion") == COMPUTE_DOMAINS_V1BETA1.api_version:
        return COMPUTE_DOMAINS_V1BETA1
    return COMPUTE_DOMAINS


class Slice(msgspec.Struct, frozen=True, kw_only=True):
    """One slice of a Placement the tests write: its clique, channel and (node, pods)."""

    clique: str
    channel: int
    members: Sequence[tuple[str, Sequence[str]]]


def placement_body(domain: ComputeDomain, spec: dict[str, Any]) -> dict[str, Any]:
    """A Placement of ``domain`` (same name, owner reference to it) with ``spec``."""
    return {
        "apiVersion": PLACEMENTS.api_version,
        "kind": PLACEMENTS.kind,
        "metadata": {
            "name": domain.metadata.name,
            "namespace": NAMESPACE,
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
        },
        "spec": spec,
    }


class Cluster:
    """API writes and reads for the tests, through cdo's own client."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client

    # -- domains ---------------------------------------------------------------------------

    async def create_domain(
        self, name: str, template: str, *, num_nodes: int | None = None, **spec: Any
    ) -> ComputeDomain:
        """Create the domain (as v1beta1 when ``num_nodes`` is given); return it as stored."""
        body = domain_manifest(name, template, num_nodes=num_nodes, **spec)
        await self.client.create(resource_of(body), body, namespace=NAMESPACE)
        domain = await self.domain(name)
        assert domain is not None
        return domain

    async def domain(self, name: str) -> ComputeDomain | None:
        raw = await self.client.get_or_none(COMPUTE_DOMAINS, name, namespace=NAMESPACE)
        return None if raw is None else msgspec.json.decode(raw, type=ComputeDomain)

    async def condition(self, name: str, kind: str) -> DomainCondition | None:
        domain = await self.domain(name)
        return None if domain is None else domain.status.condition(kind)

    async def delete_domain(self, name: str) -> None:
        await self.client.delete(COMPUTE_DOMAINS, name, namespace=NAMESPACE)

    # -- templates and the device class ----------------------------------------------------

    async def template(self, name: str) -> ResourceClaimTemplate | None:
        raw = await self.client.get_or_none(RESOURCE_CLAIM_TEMPLATES, name, namespace=NAMESPACE)
        return None if raw is None else msgspec.json.decode(raw, type=ResourceClaimTemplate)

    async def device_class(self, name: str) -> DeviceClass | None:
        raw = await self.client.get_or_none(DEVICE_CLASSES, name)
        return None if raw is None else msgspec.json.decode(raw, type=DeviceClass)

    # -- the allocator's Placement ---------------------------------------------------------

    async def place(
        self,
        domain: ComputeDomain,
        members: Sequence[tuple[str, Sequence[str]]],
        *,
        channel: int = 3,
        gpus_per_pod: int = 4,
        size: int | None = None,
    ) -> None:
        """Write a one-slice Placement as the allocator does: members are (node, pod names)."""
        await self.place_slices(
            domain,
            [Slice(clique=CLIQUE, channel=channel, members=members)],
            gpus_per_pod=gpus_per_pod,
            size=size,
        )

    async def place_slices(
        self,
        domain: ComputeDomain,
        slices: Sequence[Slice],
        *,
        gpus_per_pod: int = 4,
        size: int | None = None,
    ) -> None:
        """Write the Placement as the allocator does: the slices in order, ranks consecutive
        from 0, each slice holding room for exactly its pods."""
        written: list[dict[str, Any]] = []
        rank = 0
        for index, piece in enumerate(slices):
            first = rank
            members = []
            for slot, (node, pods) in enumerate(piece.members):
                placed = []
                for name in pods:
                    placed.append({"name": name, "rank": rank})
                    rank += 1
                members.append(
                    {"node": node, "slot": slot, "gpus": gpus_per_pod * len(pods), "pods": placed}
                )
            written.append(
                {
                    "index": index,
                    "clique": piece.clique,
                    "channel": piece.channel,
                    "firstRank": first,
                    "size": rank - first,
                    "members": members,
                }
            )
        spec = {
            "gpusPerPod": gpus_per_pod,
            "size": rank if size is None else size,
            "slices": written,
        }
        await self.client.create(PLACEMENTS, placement_body(domain, spec), namespace=NAMESPACE)

    async def place_legacy(
        self, domain: ComputeDomain, members: Sequence[tuple[str, Sequence[str]]]
    ) -> None:
        """Write a Placement as the first release of the allocator did: one clique, pods as
        plain names."""
        spec = {
            "clique": CLIQUE,
            "channel": 3,
            "gpusPerPod": 4,
            "size": sum(len(pods) for _, pods in members),
            "members": [
                {"node": node, "slot": slot, "gpus": 4 * len(pods), "pods": list(pods)}
                for slot, (node, pods) in enumerate(members)
            ],
        }
        await self.client.create(PLACEMENTS, placement_body(domain, spec), namespace=NAMESPACE)

    async def release(self, domain: str) -> None:
        """Delete the Placement, as the allocator does once it has released the domain."""
        await self.client.delete(PLACEMENTS, domain, namespace=NAMESPACE)

    # -- nodes, as kubelet, IMEX agent and health monitor report them ------------------------

    async def create_node(
        self, name: str, *, address: str, imex: str | None = "True", clique: str = CLIQUE
    ) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"nvidia.com/gpu.clique": clique}},
            "status": {
                "addresses": [{"type": "InternalIP", "address": address}],
                "conditions": [
                    {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": ""}
                ],
            },
        }
        await self.client.create(NODES, body)
        if imex is not None:
            await self.report_imex(name, imex)

    async def report_imex(self, node: str, status: str, *, reason: str = "") -> None:
        """What the IMEX agent writes: its node condition, merged by type."""
        condition = {
            "type": IMEX_READY_CONDITION,
            "status": status,
            "reason": reason or ("ImexReady" if status == "True" else "WaitingForPeers"),
            "message": "nvidia-imex-ctl -q: READY" if status == "True" else "not READY",
            "lastHeartbeatTime": now(),
            "lastTransitionTime": now(),
        }
        await self.client.patch(
            NODES,
            node,
            {"status": {"conditions": [condition]}},
            subresource="status",
            patch_type="strategic",
        )

    async def taint(self, node: str, *, fault: bool) -> None:
        """What the health monitor writes: the fault taint on or off."""
        taints = (
            [{"key": GPU_FAULT_TAINT, "value": "xid-79", "effect": "NoSchedule"}] if fault else []
        )
        await self.client.patch(NODES, node, {"spec": {"taints": taints}})

    # -- pods, as the workload controller, scheduler and kubelet make them -----------------

    async def create_pod(self, name: str, template: str, *, node: str = "") -> None:
        spec: dict[str, Any] = {
            "containers": [{"name": "main", "image": "trainer"}],
            "resourceClaims": [{"name": "channel", "resourceClaimTemplateName": template}],
        }
        if node:
            spec["nodeName"] = node
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": spec,
        }
        await self.client.create(PODS, body, namespace=NAMESPACE)

    async def set_phase(self, pod: str, phase: str) -> None:
        await self.client.patch(
            PODS, pod, {"status": {"phase": phase}}, namespace=NAMESPACE, subresource="status"
        )

    async def delete_pod(self, pod: str) -> None:
        await self.client.delete(PODS, pod, namespace=NAMESPACE)

    async def run_gang(
        self, domain: ComputeDomain, nodes: Sequence[str], per_node: int = 1
    ) -> None:
        """Pods on each node, placed, running, IMEX ready: a domain that should become Ready."""
        template = domain.spec.channel.resource_claim_template.name
        members = []
        for node in nodes:
            pods = [f"{domain.metadata.name}-{node}-{i}" for i in range(per_node)]
            for pod in pods:
                await self.create_pod(pod, template, node=node)
            members.append((node, pods))
        await self.place(domain, members)
        for _, pods in members:
            for pod in pods:
                await self.set_phase(pod, "Running")

    # -- Kubernetes Events -------------------------------------------------------------------

    async def events(self, involving: str) -> list[CoreEvent]:
        return await events_involving(self.client, involving, namespace=NAMESPACE)


class MembershipLog(EventLog[DomainMembershipChanged]):
    """Every membership event on the bus, in arrival order, by domain name, and the KV snapshots."""

    def __init__(self, bus: EventBus) -> None:
        super().__init__(
            bus,
            kind=DomainMembershipChanged,
            subject=DOMAIN_MEMBERSHIP.wildcard(),
            key=lambda event: event.name,
            snapshot_key=lambda name: DOMAIN_SNAPSHOT.render(namespace=NAMESPACE, name=name),
        )

    def phases(self, name: str) -> list[str]:
        return [e.phase for e in self.of(name)]
