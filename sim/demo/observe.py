"""What the demo watches, read from the Kubernetes API: the workload's pods, every node's IMEX
and fault state and clique label, the ComputeDomain (in one clique or several) and its
Placement's slices (with their failover marks: stuck since when, moved from where).
:func:`cluster_view` turns the API objects into a :class:`ClusterView` (pure); :func:`observe`
reads them."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import msgspec

from shared.crds import COMPUTE_DOMAINS, PLACEMENTS, ComputeDomain, Placement
from shared.crds.names import (
    CLIQUE_LABEL,
    GPU_FAULT_TAINT,
    IMEX_READY_CONDITION,
    PLACED_CONDITION,
    PLACEMENT_GATE,
)
from shared.crds.phase import domain_phase
from shared.kube.client import KubeClient
from shared.kube.models import Node, Pod
from shared.kube.resources import NODES, PODS

TRACE_CONTEXT_ANNOTATION = "cdo.dev/trace-context"
"""A W3C traceparent on a ComputeDomain: the trace its life is recorded in, where set."""

_FINISHED = ("Succeeded", "Failed")


@dataclass(frozen=True)
class PodCounts:
    """The workload's live pods: still gated by the allocator, placed (ungated), running."""

    total: int = 0
    gated: int = 0
    placed: int = 0
    running: int = 0
    waiting: str = ""
    """Why a gated pod waits (its ``cdo.dev/Placed`` reason, e.g. CliqueFull), if one says."""
    terminating: int = 0
    """Pods being deleted that still hold their node (not counted in ``total``)."""


@dataclass(frozen=True)
class CliqueView:
    """One clique of the domain (``status.cliques[]``): its channel there and how far it is."""

    clique: str
    channel: int
    nodes: int = 0
    ready_nodes: int = 0
    pods: int = 0
    running_pods: int = 0


@dataclass(frozen=True)
class SliceView:
    """One slice of the Placement: consecutive ranks of the gang in one clique."""

    index: int
    clique: str
    channel: int
    first_rank: int
    size: int
    nodes: tuple[str, ...] = ()
    """Member nodes, in slot order."""
    pods: int = 0
    """Pods pinned to the slice's nodes."""
    waiting_since: datetime | None = None
    """Since when the allocator finds the slice's clique cannot hold it (failover pending)."""
    moved_from: str = ""
    """The clique the slice last failed over from, if it did."""

    @property
    def last_rank(self) -> int:
        return self.first_rank + self.size - 1


@dataclass(frozen=True)
class DomainView:
    phase: str
    reason: str = ""
    clique: str | None = None
    """The clique of a domain in one clique; None for one in several (see ``cliques``)."""
    channel: int | None = None
    members: tuple[str, ...] = ()
    """Member nodes, by clique and then IMEX slot."""
    trace_context: str | None = None
    cliques: tuple[CliqueView, ...] = ()
    """Every clique the domain uses (one entry for a domain in one clique)."""


@dataclass(frozen=True)
class ClusterView:
    pods: PodCounts = PodCounts()
    pod_nodes: dict[str, str] = field(default_factory=dict)
    """Node of each running pod, by pod name."""
    nodes: int = 0
    imex_ready: int = 0
    tainted: dict[str, str] = field(default_factory=dict)
    """Nodes with the GPU fault taint, and its effect."""
    cliques: dict[str, str] = field(default_factory=dict)
    """Clique label of each node."""
    domain: DomainView | None = None
    slices: tuple[SliceView, ...] = ()
    """The Placement's slices, by index; empty while there is none."""
    has_placement: bool = False

    def gone(self) -> bool:
        """No pod of the workload is left (not even a terminating one), nor the domain, nor
        its Placement: the allocator has released the domain's nodes and channels."""
        return (
            self.pods.total == 0
            and self.pods.terminating == 0
            and self.domain is None
            and not self.has_placement
        )

    def ready_with(self, pods: int) -> bool:
        """The domain is Ready and exactly ``pods`` pods run."""
        return (
            self.domain is not None
            and self.domain.phase == "Ready"
            and self.pods.total == pods
            and self.pods.running == pods
        )


def _live(pod: Pod) -> bool:
    return pod.metadata.deletion_timestamp is None and pod.status.phase not in _FINISHED


def _terminating(pod: Pod) -> bool:
    return pod.metadata.deletion_timestamp is not None and pod.status.phase not in _FINISHED


def pod_counts(pods: Sequence[Pod]) -> PodCounts:
    live = [pod for pod in pods if _live(pod)]
    gated = [
        pod for pod in live if any(g.name == PLACEMENT_GATE for g in pod.spec.scheduling_gates)
    ]
    waiting = ""
    for pod in gated:
        condition = pod.condition(PLACED_CONDITION)
        if condition is not None and condition.status == "False" and condition.reason:
            waiting = condition.reason
            break
    return PodCounts(
        total=len(live),
        gated=len(gated),
        placed=len(live) - len(gated),
        running=sum(1 for pod in live if pod.status.phase == "Running"),
        waiting=waiting,
        terminating=sum(1 for pod in pods if _terminating(pod)),
    )


def domain_view(domain: ComputeDomain) -> DomainView:
    phase, reason = domain_phase(domain)
    return DomainView(
        phase=phase,
        reason=reason,
        clique=domain.status.clique,
        channel=domain.status.channel,
        members=tuple(node.name for node in domain.status.nodes),
        trace_context=domain.metadata.annotations.get(TRACE_CONTEXT_ANNOTATION),
        cliques=tuple(
            CliqueView(
                clique=entry.clique,
                channel=entry.channel,
                nodes=entry.nodes,
                ready_nodes=entry.ready_nodes,
                pods=entry.pods,
                running_pods=entry.running_pods,
            )
            for entry in domain.status.cliques
        ),
    )


def slice_views(placement: Placement) -> tuple[SliceView, ...]:
    """The Placement's slices, by index (a first-release record read as its one slice)."""
    return tuple(
        SliceView(
            index=piece.index,
            clique=piece.clique,
            channel=piece.channel,
            first_rank=piece.first_rank,
            size=piece.size,
            nodes=tuple(member.node for member in sorted(piece.members, key=lambda m: m.slot)),
            pods=piece.placed_pods,
            waiting_since=piece.waiting_since,
            moved_from=piece.moved_from,
        )
        for piece in sorted(placement.spec.all_slices, key=lambda p: p.index)
    )


def cluster_view(
    pods: Sequence[Pod],
    nodes: Sequence[Node],
    domain: ComputeDomain | None,
    placement: Placement | None = None,
) -> ClusterView:
    def imex_ready(node: Node) -> bool:
        return any(
            c.type == IMEX_READY_CONDITION and c.status == "True" for c in node.status.conditions
        )

    tainted = {
        node.metadata.name: taint.effect
        for node in nodes
        for taint in node.spec.taints
        if taint.key == GPU_FAULT_TAINT
    }
    return ClusterView(
        pods=pod_counts(pods),
        pod_nodes={
            pod.metadata.name: pod.spec.node_name
            for pod in pods
            if _live(pod) and pod.status.phase == "Running"
        },
        nodes=len(nodes),
        imex_ready=sum(1 for node in nodes if imex_ready(node)),
        tainted=tainted,
        cliques={
            node.metadata.name: node.metadata.labels[CLIQUE_LABEL]
            for node in nodes
            if CLIQUE_LABEL in node.metadata.labels
        },
        domain=None if domain is None else domain_view(domain),
        slices=() if placement is None else slice_views(placement),
        has_placement=placement is not None,
    )


class _Pods(msgspec.Struct):
    items: list[Pod]


class _Nodes(msgspec.Struct):
    items: list[Node]


@dataclass(frozen=True)
class Target:
    """The objects the demo's manifests create."""

    namespace: str
    domain: str
    selector: str
    replicas: int


async def observe(client: KubeClient, target: Target) -> ClusterView:
    pods, nodes, domain, placement = await asyncio.gather(
        client.list(PODS, namespace=target.namespace, label_selector=target.selector),
        client.list(NODES),
        client.get_or_none(COMPUTE_DOMAINS, target.domain, namespace=target.namespace),
        client.get_or_none(PLACEMENTS, target.domain, namespace=target.namespace),
    )
    return cluster_view(
        msgspec.json.decode(pods, type=_Pods).items,
        msgspec.json.decode(nodes, type=_Nodes).items,
        None if domain is None else msgspec.json.decode(domain, type=ComputeDomain),
        None if placement is None else msgspec.json.decode(placement, type=Placement),
    )
