"""What ``cdo status`` reports, as data: rows built from API objects and events (pure).

- **Domains** come from the ComputeDomains' status (written by the domain controller): phase,
  clique, channel, member nodes with their readiness. A domain whose slices use several cliques
  carries one :class:`DomainClique` per clique (``status.cliques``).
- **Cliques** come from ``CliqueCapacity`` snapshots (published by the clique allocator).
- **Nodes** are grouped by their clique label (written by the health monitors): how many are
  Ready, IMEX-ready, and carry the fault taint.

The phase is :func:`shared.crds.phase.domain_phase`, the one the domain controller publishes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime

import msgspec

from shared.crds import ComputeDomain
from shared.crds.names import GPU_FAULT_TAINT, IMEX_READY_CONDITION
from shared.crds.phase import domain_phase
from shared.events import CliqueCapacity
from shared.kube.models import Node

NO_CLIQUE = "(no clique label)"


class Member(msgspec.Struct, frozen=True, kw_only=True):
    node: str
    slot: int
    status: str
    clique: str = ""


class DomainClique(msgspec.Struct, frozen=True, kw_only=True):
    """One clique a domain's slices use (``status.cliques``)."""

    clique: str
    channel: int
    slices: tuple[int, ...]
    nodes: int
    ready_nodes: int
    pods: int
    running_pods: int


class DomainRow(msgspec.Struct, frozen=True, kw_only=True):
    namespace: str
    name: str
    phase: str
    clique: str
    """The clique of a domain in one clique; "" when in several (see ``cliques``)."""
    channel: int | None
    members: tuple[Member, ...]
    reason: str = ""
    cliques: tuple[DomainClique, ...] = ()

    @property
    def ready_members(self) -> int:
        return sum(1 for member in self.members if member.status == "Ready")

    @property
    def several_cliques(self) -> bool:
        return len(self.cliques) > 1


class CliqueRow(msgspec.Struct, frozen=True, kw_only=True):
    clique: str
    nodes_total: int
    nodes_healthy: int
    gpus_total: int
    gpus_free: int
    largest_free_block: int
    domains: int
    channels_free: int
    as_of: datetime


class NodeGroupRow(msgspec.Struct, frozen=True, kw_only=True):
    clique: str
    nodes: int
    ready: int
    imex_ready: int
    faulted: tuple[str, ...]


class Report(msgspec.Struct, kw_only=True):
    domains: list[DomainRow] = msgspec.field(default_factory=list)
    cliques: list[CliqueRow] = msgspec.field(default_factory=list)
    nodes: list[NodeGroupRow] = msgspec.field(default_factory=list)
    notes: list[str] = msgspec.field(default_factory=list)
    kubernetes_reachable: bool = True
    nats_reachable: bool = True


def domain_row(domain: ComputeDomain) -> DomainRow:
    phase, reason = domain_phase(domain)
    return DomainRow(
        namespace=domain.metadata.namespace,
        name=domain.metadata.name,
        phase=phase,
        clique=domain.status.clique or "",
        channel=domain.status.channel,
        members=tuple(
            Member(node=node.name, slot=node.index, status=node.status, clique=node.clique_id)
            for node in domain.status.nodes
        ),
        reason=reason,
        cliques=tuple(
            DomainClique(
                clique=entry.clique,
                channel=entry.channel,
                slices=entry.slices,
                nodes=entry.nodes,
                ready_nodes=entry.ready_nodes,
                pods=entry.pods,
                running_pods=entry.running_pods,
            )
            for entry in domain.status.cliques
        ),
    )


def clique_row(event: CliqueCapacity) -> CliqueRow:
    return CliqueRow(
        clique=event.clique,
        nodes_total=event.nodes_total or len(event.nodes),
        nodes_healthy=event.nodes_healthy,
        gpus_total=event.gpus_total,
        gpus_free=event.gpus_free,
        largest_free_block=event.largest_free_block,
        domains=event.domains,
        channels_free=event.channels_free,
        as_of=event.time,
    )


def node_groups(nodes: Sequence[Node], *, clique_label: str) -> list[NodeGroupRow]:
    groups: dict[str, list[Node]] = defaultdict(list)
    for node in nodes:
        groups[node.metadata.labels.get(clique_label, NO_CLIQUE)].append(node)

    def is_true(node: Node, kind: str) -> bool:
        condition = node.condition(kind)
        return condition is not None and condition.status == "True"

    return [
        NodeGroupRow(
            clique=clique,
            nodes=len(members),
            ready=sum(1 for node in members if is_true(node, "Ready")),
            imex_ready=sum(1 for node in members if is_true(node, IMEX_READY_CONDITION)),
            faulted=tuple(
                sorted(
                    node.metadata.name
                    for node in members
                    if any(taint.key == GPU_FAULT_TAINT for taint in node.spec.taints)
                )
            ),
        )
        for clique, members in sorted(groups.items(), key=lambda item: item[0] == NO_CLIQUE)
    ]
