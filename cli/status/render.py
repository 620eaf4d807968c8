"""``cdo status`` as text: three tables (domains, cliques, nodes by clique) and notes (pure)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from datetime import UTC, datetime

from cli.status.report import DomainClique, DomainRow, Member, Report

_UNAVAILABLE = "  unavailable (see the error below)"


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
    lines = ["DOMAINS (Kubernetes API)"]
    lines += _domains_section(report) if report.kubernetes_reachable else [_UNAVAILABLE]
    lines += ["", "CLIQUES (capacity snapshots on NATS)"]
    lines += _cliques_section(report, now) if report.nats_reachable else [_UNAVAILABLE]
    lines += ["", "NODES BY CLIQUE (Kubernetes API)"]
    lines += _nodes_section(report) if report.kubernetes_reachable else [_UNAVAILABLE]
    lines += [f"note: {note}" for note in report.notes]
    return "\n".join(lines)


def _domains_section(report: Report) -> list[str]:
    if not report.domains:
        return ["  no ComputeDomains"]
    rows = [_domain_cells(domain) for domain in report.domains]
    table = _table(["NAMESPACE", "NAME", "PHASE", "CLIQUE", "CHANNEL", "MEMBERS"], rows)
    lines = [table[0]]
    for domain, line in zip(report.domains, table[1:], strict=True):
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
            _age(clique.as_of, now),
        ]
        for clique in report.cliques
    ]
    headers = ["CLIQUE", "NODES OK", "GPUS FREE", "LARGEST FREE", "DOMAINS", "CHANNELS", "AGE"]
    return _table(headers, rows)


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
    return _table(["CLIQUE", "NODES", "READY", "IMEX READY", "GPU FAULT"], rows)


def _age(moment: datetime, now: datetime) -> str:
    seconds = max(0, int((now - moment).total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"
