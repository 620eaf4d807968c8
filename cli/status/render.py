"""``cdo status`` as text: three tables (domains, cliques, nodes by clique) and notes (pure)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from datetime import UTC, datetime

from cli.status.report import DomainClique, DomainRow, Member, Report
from cli.tables import age, table

_UNAVAILABLE = "  unavailable (see the error below)"


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


def _domain_cells(domain: DomainRow, *, wide: bool = False) -> list[str]:
    several = domain.several_cliques
    cells = [
        domain.namespace,
        domain.name,
        domain.phase + (f" ({domain.reason})" if domain.reason else ""),
        f"{len(domain.cliques)} cliques" if several else domain.clique or "-",
        "-" if several or domain.channel is None else str(domain.channel),
        f"{domain.ready_members}/{len(domain.members)} ready",
    ]
    if wide:
        pods = sum(entry.pods for entry in domain.cliques)
        running = sum(entry.running_pods for entry in domain.cliques)
        slices = sum(len(entry.slices) for entry in domain.cliques)
        cells += [
            str(slices),
            f"{running}/{pods}",
            ", ".join(m.node for m in domain.members) or "-",
        ]
    return cells


TITLES = (
    "DOMAINS (Kubernetes API)",
    "CLIQUES (capacity snapshots on NATS)",
    "NODES BY CLIQUE (Kubernetes API)",
)
HEADER_STARTS = ("NAMESPACE ", "CLIQUE ")
"""How the header row of each table starts."""


def render(
    report: Report, *, now: datetime | None = None, wide: bool = False, headers: bool = True
) -> str:
    """The tables; ``wide`` adds each domain's slices, pods running and member nodes; without
    ``headers`` the section titles, table headers and blank lines are left out (rows only)."""
    text = _render(report, now=now, wide=wide)
    if headers:
        return text
    return "\n".join(
        line
        for line in text.split("\n")
        if line and line not in TITLES and not line.startswith(HEADER_STARTS)
    )


def _render(report: Report, *, now: datetime | None, wide: bool) -> str:
    now = now or datetime.now(UTC)
    lines = ["DOMAINS (Kubernetes API)"]
    lines += _domains_section(report, wide=wide) if report.kubernetes_reachable else [_UNAVAILABLE]
    lines += ["", "CLIQUES (capacity snapshots on NATS)"]
    lines += _cliques_section(report, now) if report.nats_reachable else [_UNAVAILABLE]
    lines += ["", "NODES BY CLIQUE (Kubernetes API)"]
    lines += _nodes_section(report) if report.kubernetes_reachable else [_UNAVAILABLE]
    lines += [f"note: {note}" for note in report.notes]
    return "\n".join(lines)


def _domains_section(report: Report, *, wide: bool) -> list[str]:
    if not report.domains:
        return ["  no ComputeDomains"]
    rows = [_domain_cells(domain, wide=wide) for domain in report.domains]
    headers = ["NAMESPACE", "NAME", "PHASE", "CLIQUE", "CHANNEL", "MEMBERS"]
    drawn = table([*headers, "SLICES", "PODS RUNNING", "NODES"] if wide else headers, rows)
    lines = [drawn[0]]
    for domain, line in zip(report.domains, drawn[1:], strict=True):
        lines.append(line)
        lines += domain_lines(domain)
    return lines


def _cliques_section(report: Report, now: datetime) -> list[str]:
    if not report.cliques:
        return ["  no capacity published yet (the clique allocator publishes it)"]
    rows = [
        [
            clique.clique,
            f"{clique.nodes_healthy}/{clique.nodes_total}",
            f"{clique.gpus_free}/{clique.gpus_total}",
            str(clique.largest_free_block),
            str(clique.domains),
            str(clique.channels_free),
            age(clique.as_of, now),
        ]
        for clique in report.cliques
    ]
    headers = ["CLIQUE", "NODES OK", "GPUS FREE", "LARGEST FREE", "DOMAINS", "CHANNELS", "AGE"]
    return table(headers, rows)


def _nodes_section(report: Report) -> list[str]:
    if not report.nodes:
        return ["  no nodes"]
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
    return table(["CLIQUE", "NODES", "READY", "IMEX READY", "GPU FAULT"], rows)
