"""An :class:`~cli.explain.explain.Explanation` as one screen of text (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from cli.explain.explain import EventLine, Explanation, Finding
from cli.explain.facts import CliqueFact
from cli.tables import age, table

_MESSAGE_WIDTH = 160


def _finding_lines(finding: Finding) -> list[str]:
    mark = "!" if finding.problem else " "
    lines = [f"{mark} {finding.reason} ({finding.subject}): {finding.what}"]
    if finding.message:
        lines.append(f"    {_short(finding.message)}")
    if finding.then and finding.problem:
        lines.append(f"    -> {finding.then}")
    return lines


def _short(text: str) -> str:
    return text if len(text) <= _MESSAGE_WIDTH else text[: _MESSAGE_WIDTH - 3] + "..."


def _clique_rows(cliques: Sequence[CliqueFact], now: datetime) -> list[list[str]]:
    return [
        [
            c.clique,
            f"{c.nodes_healthy}/{c.nodes_total}",
            f"{c.gpus_free}/{c.gpus_total}",
            str(c.largest_free_block),
            "-" if c.channels_free is None else str(c.channels_free),
            c.source if c.as_of is None else f"{c.source}, {age(c.as_of, now)} old",
        ]
        for c in cliques
    ]


def _event_rows(lines: Sequence[EventLine], now: datetime) -> list[list[str]]:
    rows = []
    for line in lines:
        e = line.event
        message = _short(e.message) + (f" (x{e.count})" if e.count > 1 else "")
        if line.what:
            message += f" [{line.what}]"
        age_ = "-" if e.last is None else age(e.last, now)
        rows.append([age_, e.type, e.reason, f"{e.kind}/{e.name}", message])
    return rows


def render(explanation: Explanation, *, now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    e = explanation
    lines = [f"{e.target}: {e.phase or 'unknown'}", f"  {e.summary}", "", "WHY"]
    lines += [line for f in e.findings for line in _finding_lines(f)] or ["  nothing to say"]
    lines += ["", "SLICES (Placement)"]
    if e.slices:
        rows = [
            [
                str(s.index),
                s.clique,
                str(s.channel),
                s.ranks,
                f"{s.placed_pods}/{s.size}"
                + (f" +{s.channel_only} without GPUs" if s.channel_only else ""),
                ", ".join(s.reasons) or "-",
            ]
            for s in e.slices
        ]
        lines += [
            "  " + line
            for line in table(["SLICE", "CLIQUE", "CHANNEL", "RANKS", "PLACED", "WAITING ON"], rows)
        ]
    else:
        lines.append("  not placed")
    if e.waiting_pods:
        pods = "1 pod" if e.waiting_pods == 1 else f"{e.waiting_pods} pods"
        lines.append(f"  {pods} still gated (waiting for a slot)")
    lines += ["", "CLIQUES (capacity)"]
    if e.cliques:
        lines += [
            "  " + line
            for line in table(
                ["CLIQUE", "NODES OK", "GPUS FREE", "LARGEST FREE", "CHANNELS", "SOURCE"],
                _clique_rows(e.cliques, now),
            )
        ]
    else:
        lines.append("  no clique in the cluster")
    lines += ["", "NODES (members: health, IMEX, taints)"]
    if e.nodes:
        rows = [
            [n.name, n.clique, n.ready, n.gpu, n.imex, n.imex_domain, ", ".join(n.taints) or "-"]
            for n in e.nodes
        ]
        lines += [
            "  " + line
            for line in table(
                ["NODE", "CLIQUE", "READY", "GPU", "IMEX", "IMEX DOMAIN", "TAINTS"], rows
            )
        ]
    else:
        lines.append("  no member node yet")
    lines += ["", "EVENTS (most recent last)"]
    if e.events:
        lines += [
            "  " + line
            for line in table(
                ["AGE", "TYPE", "REASON", "OBJECT", "MESSAGE"], _event_rows(e.events, now)
            )
        ]
    else:
        lines.append("  none")
    lines += [f"note: {note}" for note in e.notes]
    return "\n".join(lines)
