"""``cdo status``: domains, cliques and nodes at a glance.

- **Domains** come from the Kubernetes API (the ComputeDomains' status, written by the domain
  controller): phase, clique, channel, member nodes with their readiness. A domain whose slices
  use several cliques gets one line per clique (``status.cliques``: its slices, channel, members
  ready of total, pods running) with that clique's member nodes under it.
- **Cliques** come from the KV snapshots on NATS (``CliqueCapacity``, published by the clique
  allocator): nodes, free GPUs, the largest pod that fits now, domains, free channels.
- **Nodes** come from the Kubernetes API, grouped by their clique label (written by the health
  monitors): how many are Ready, IMEX-ready, and carry the fault taint.

The phase is the one the domain controller publishes in membership events, derived from the
status the same way: Deleting, Pending (not placed), Degraded, Ready, else Placed.
"""

from __future__ import annotations

import asyncio
import textwrap
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TextIO

import msgspec
from nats.js.errors import BucketNotFoundError, NotFoundError

from shared.bus import EventBus
from shared.cli.connection import Endpoints, connect_kube, connect_nats, kube_unreachable
from shared.cli.errors import CliError, UnreachableError
from shared.crds import COMPUTE_DOMAINS, ComputeDomain
from shared.crds.names import CLIQUE_LABEL, GPU_FAULT_TAINT, IMEX_READY_CONDITION
from shared.events import CliqueCapacity
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.models import Node
from shared.kube.resources import NODES

NO_CLIQUE = "(no clique label)"
_UNAVAILABLE = "  unavailable (see the error below)"


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


class _DomainList(msgspec.Struct):
    items: list[ComputeDomain]


class _NodeList(msgspec.Struct):
    items: list[Node]


# -- pure parts -------------------------------------------------------------------------------


def domain_phase(domain: ComputeDomain) -> tuple[str, str]:
    """The phase and its reason, as the domain controller derives them from the status."""
    status = domain.status
    if domain.deleting:
        return "Deleting", ""
    placed = status.condition("Placed")
    degraded = status.condition("Degraded")
    ready = status.condition("Ready")
    if placed is None or placed.status != "True":
        return "Pending", placed.reason if placed is not None else ""
    if degraded is not None and degraded.status == "True":
        return "Degraded", degraded.reason
    if status.status == "Ready":
        return "Ready", ""
    return "Placed", ready.reason if ready is not None else ""


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


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=False)]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in (headers, *rows)
    ]


def _members_lines(members: Sequence[Member], *, indent: str) -> list[str]:
    """``members: n1 (slot 0, Ready), ...``, wrapped."""
    if not members:
        return []
    text = ", ".join(f"{m.node} (slot {m.slot}, {m.status})" for m in members)
    return textwrap.wrap(
        text, width=100, initial_indent=f"{indent}members: ", subsequent_indent=indent + "  "
    )


def clique_line(entry: DomainClique) -> str:
    """One clique of a domain in several: its slices, channel, members and pods."""
    slices = ", ".join(str(index) for index in entry.slices)
    return (
        f"clique {entry.clique}: {'slice' if len(entry.slices) == 1 else 'slices'} {slices}, "
        f"channel {entry.channel}, {entry.ready_nodes}/{entry.nodes} members ready, "
        f"{entry.running_pods}/{entry.pods} pods running"
    )


def domain_lines(domain: DomainRow) -> list[str]:
    """What goes under a domain's row: its members; per clique for a domain in several."""
    if not domain.several_cliques:
        return _members_lines(domain.members, indent="  ")
    lines = []
    for entry in domain.cliques:
        lines.append("  " + clique_line(entry))
        members = [m for m in domain.members if m.clique == entry.clique]
        lines += _members_lines(members, indent="    ")
    return lines


def _domain_cells(domain: DomainRow) -> list[str]:
    several = domain.several_cliques
    return [
        domain.namespace,
        domain.name,
        domain.phase + (f" ({domain.reason})" if domain.reason else ""),
        f"{len(domain.cliques)} cliques" if several else domain.clique or "-",
        "-" if several or domain.channel is None else str(domain.channel),
        f"{domain.ready_members}/{len(domain.members)} ready",
    ]


def render(report: Report, *, now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    lines: list[str] = ["DOMAINS (Kubernetes API)"]
    if not report.kubernetes_reachable:
        lines.append(_UNAVAILABLE)
    elif report.domains:
        rows = [_domain_cells(domain) for domain in report.domains]
        table = _table(["NAMESPACE", "NAME", "PHASE", "CLIQUE", "CHANNEL", "MEMBERS"], rows)
        lines.append(table[0])
        for domain, line in zip(report.domains, table[1:], strict=True):
            lines.append(line)
            lines += domain_lines(domain)
    else:
        lines.append("  no ComputeDomains")
    lines += ["", "CLIQUES (capacity snapshots on NATS)"]
    if not report.nats_reachable:
        lines.append(_UNAVAILABLE)
    elif report.cliques:
        rows = [
            [
                clique.clique,
                f"{clique.nodes_healthy}/{clique.nodes_total}",
                f"{clique.gpus_free}/{clique.gpus_total}",
                str(clique.largest_free_block),
                str(clique.domains),
                str(clique.channels_free),
                _age(clique.as_of, now),
            ]
            for clique in report.cliques
        ]
        lines += _table(
            ["CLIQUE", "NODES OK", "GPUS FREE", "LARGEST FREE", "DOMAINS", "CHANNELS", "AGE"],
            rows,
        )
    else:
        lines.append("  no capacity published yet (the clique allocator publishes it)")
    lines += ["", "NODES BY CLIQUE (Kubernetes API)"]
    if not report.kubernetes_reachable:
        lines.append(_UNAVAILABLE)
    elif report.nodes:
        rows = [
            [
                group.clique,
                str(group.nodes),
                str(group.ready),
                str(group.imex_ready),
                ", ".join(group.faulted) or "-",
            ]
            for group in report.nodes
        ]
        lines += _table(["CLIQUE", "NODES", "READY", "IMEX READY", "GPU FAULT"], rows)
    else:
        lines.append("  no nodes")
    lines += [f"note: {note}" for note in report.notes]
    return "\n".join(lines)


def _age(moment: datetime, now: datetime) -> str:
    seconds = max(0, int((now - moment).total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


# -- reading ----------------------------------------------------------------------------------


async def _from_kube(endpoints: Endpoints, report: Report) -> None:
    client: KubeClient = await connect_kube(endpoints)
    try:
        try:
            nodes = msgspec.json.decode(await client.list(NODES), type=_NodeList).items
        except KubeApiError as exc:
            if exc.code == 0:
                raise kube_unreachable(endpoints, exc) from exc
            raise CliError(f"listing nodes failed: {exc}") from exc
        report.nodes = node_groups(nodes, clique_label=CLIQUE_LABEL)
        try:
            raw = await client.list(COMPUTE_DOMAINS)
        except KubeApiError as exc:
            if exc.not_found:
                report.notes.append("the ComputeDomain CRD is not installed in this cluster")
                return
            raise CliError(f"listing ComputeDomains failed: {exc}") from exc
        domains = msgspec.json.decode(raw, type=_DomainList).items
        report.domains = sorted(
            (domain_row(domain) for domain in domains),
            key=lambda row: (row.namespace, row.name),
        )
    finally:
        await client.close()


async def _from_nats(endpoints: Endpoints, report: Report) -> None:
    bus: EventBus = await connect_nats(endpoints)
    try:
        try:
            snapshots = await bus.snapshots("v1.clique.>")
        except (BucketNotFoundError, NotFoundError):
            report.notes.append("NATS has no snapshot bucket yet: no cdo service has run there")
            return
        report.cliques = sorted(
            (clique_row(event) for event in snapshots if isinstance(event, CliqueCapacity)),
            key=lambda row: row.clique,
        )
    finally:
        await bus.close()


async def gather(endpoints: Endpoints) -> tuple[Report, list[CliError]]:
    """Everything both sources say; the failures of either come back beside the report."""
    report = Report()
    kube, nats = await asyncio.gather(
        _from_kube(endpoints, report), _from_nats(endpoints, report), return_exceptions=True
    )
    failures: list[CliError] = []
    for outcome, source in ((kube, "kubernetes"), (nats, "nats")):
        if isinstance(outcome, CliError):
            failures.append(outcome)
            if source == "kubernetes":
                report.kubernetes_reachable = False
            else:
                report.nats_reachable = False
        elif isinstance(outcome, BaseException):
            raise outcome
    return report, failures


async def status(endpoints: Endpoints, *, as_json: bool, out: TextIO) -> None:
    """Print the report; raise the most serious failure after printing what was read."""
    report, failures = await gather(endpoints)
    if as_json:
        out.write(msgspec.json.encode(report).decode() + "\n")
    else:
        out.write(render(report) + "\n")
    out.flush()
    if failures:
        unreachable = [f for f in failures if isinstance(f, UnreachableError)]
        first = (unreachable or failures)[0]
        if len(failures) > 1:
            raise type(first)("; ".join(str(f) for f in failures))
        raise first
