"""The domain report of ``nvidia-imex-ctl -N``: assembling it and printing it as text or JSON.

``-N`` asks every node of the ctl's own nodes_config for its status and lays the answers out
as a connectivity matrix: row *From* is that node's own view of its link to node *To*. A node
that does not answer is UNAVAILABLE and its whole row INVALID. The text layout (legend,
timestamp, ``Node #i - address - STATE`` lines, the matrix, ``Domain State: X``) and the JSON
layout (``nodes`` keyed by index, each with ``status``, ``host``, ``connections``, ``changed``,
``version``; top-level ``timestamp`` and ``status``) follow the real tool's output.

All functions here are pure.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import msgspec

from sim.imex.protocol import NodeStatus
from sim.imex.states import (
    ConnectionState,
    DaemonState,
    DomainState,
    RefusalReason,
    domain_state,
)

__all__ = [
    "CellView",
    "DomainView",
    "NodeView",
    "build_domain_view",
    "differs",
    "mark_changes",
    "render_json",
    "render_text",
    "timestamp",
]


class CellView(msgspec.Struct, frozen=True, kw_only=True):
    """How one node sees its link to one other node."""

    host: str
    status: ConnectionState
    refused: RefusalReason | None = None
    changed: bool = True


class NodeView(msgspec.Struct, frozen=True, kw_only=True):
    index: int
    host: str
    hostname: str | None
    status: DaemonState
    version: str | None
    connections: tuple[CellView, ...]
    changed: bool = True


class DomainView(msgspec.Struct, frozen=True, kw_only=True):
    nodes: tuple[NodeView, ...]
    status: DomainState
    taken_at: dt.datetime


def build_domain_view(
    entries: Sequence[str],
    addresses: Sequence[str | None],
    reports: Sequence[NodeStatus | None],
    *,
    taken_at: dt.datetime,
) -> DomainView:
    """Lay the nodes' own reports out in the order of the ctl's node map.

    Cells are matched by address rather than index, so the row of a node whose map differs
    from the ctl's still lines up with the ctl's columns.
    """
    hosts = [address or entry for entry, address in zip(entries, addresses, strict=True)]
    nodes: list[NodeView] = []
    for index, report in enumerate(reports):
        if report is None:
            nodes.append(
                NodeView(
                    index=index,
                    host=hosts[index],
                    hostname=None,
                    status=DaemonState.UNAVAILABLE,
                    version=None,
                    connections=tuple(
                        CellView(host=host, status=ConnectionState.INVALID) for host in hosts
                    ),
                )
            )
            continue
        seen = {conn.host: conn for conn in report.connections if conn.host is not None}
        cells: list[CellView] = []
        for column, host in enumerate(hosts):
            conn = seen.get(host) if addresses[column] is not None else None
            if conn is None:
                cells.append(CellView(host=host, status=ConnectionState.INVALID))
            else:
                cells.append(CellView(host=host, status=conn.status, refused=conn.refused))
        nodes.append(
            NodeView(
                index=index,
                host=hosts[index],
                hostname=report.hostname,
                status=report.state,
                version=report.version,
                connections=tuple(cells),
            )
        )
    state = domain_state(
        (node.status for node in nodes),
        (cell.status for node in nodes for cell in node.connections),
    )
    return DomainView(nodes=tuple(nodes), status=state, taken_at=taken_at)


def mark_changes(previous: DomainView | None, current: DomainView) -> DomainView:
    """Set the ``changed`` flags of ``current`` against ``previous`` (for ``-n``).

    With nothing to compare against everything counts as changed, as in a one-shot ``-N``.
    """
    if previous is None:
        return current
    before = {node.host: node for node in previous.nodes}
    nodes: list[NodeView] = []
    for node in current.nodes:
        old = before.get(node.host)
        old_cells = {cell.host: cell for cell in old.connections} if old else {}
        cells = tuple(
            msgspec.structs.replace(cell, changed=_cell_changed(old_cells.get(cell.host), cell))
            for cell in node.connections
        )
        node_changed = old is None or old.status is not node.status or any(c.changed for c in cells)
        nodes.append(msgspec.structs.replace(node, connections=cells, changed=node_changed))
    return msgspec.structs.replace(current, nodes=tuple(nodes))


def _cell_changed(old: CellView | None, new: CellView) -> bool:
    return old is None or old.status is not new.status or old.refused is not new.refused


def differs(previous: DomainView | None, current: DomainView) -> bool:
    """Whether anything but the time differs (``-n`` prints only then)."""
    if previous is None:
        return True
    return msgspec.structs.replace(previous, taken_at=current.taken_at) != current


def timestamp(moment: dt.datetime) -> str:
    """The ctl's time format, e.g. ``3/25/2025 10:39:43.659`` (local time, no zero padding)."""
    millis = moment.microsecond // 1000
    return (
        f"{moment.month}/{moment.day}/{moment.year} "
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}.{millis:03d}"
    )


_LEGEND = (
    "Connectivity Table Legend:",
    "I - Invalid - no status: the node could not be asked",
    "N - Never Connected",
    "R - Recovering - connection lost, clean up not triggered yet",
    "D - Disconnected - connection lost and cleaned up",
    "A - Authenticating - mutual authentication in progress (GSSAPI)",
    "C - Connected - ready for operation",
)


def render_text(view: DomainView, *, hostnames: bool = False) -> str:
    """The human-readable ``-N`` report, ending in ``Domain State: <state>``."""
    lines = [*_LEGEND, "", timestamp(view.taken_at), "Nodes:"]
    for node in view.nodes:
        host = node.host
        if hostnames and node.hostname:
            host = f"{node.host} ({node.hostname})"
        lines.append(f"Node #{node.index:<3} - {host:<15} - {node.status.value}")
    lines.append("")
    lines.append(" Nodes From\\To" + "".join(f"{node.index:>3}" for node in view.nodes))
    for node in view.nodes:
        row = "".join(f"{cell.status.letter:>3}" for cell in node.connections)
        lines.append(f"{node.index:>8}      {row}")
    lines.append(f"Domain State: {view.status.value}")
    return "\n".join(lines) + "\n"


# Optional members (None) are left out; ``changed`` is always written, true or not.
class _JsonConnection(msgspec.Struct, kw_only=True, omit_defaults=True):
    host: str
    status: str
    changed: bool
    refused: str | None = None


class _JsonNode(msgspec.Struct, kw_only=True, omit_defaults=True, rename={"hostname": "hostName"}):
    status: str
    host: str
    hostname: str | None = None
    connections: dict[str, _JsonConnection]
    changed: bool
    version: str | None = None


class _JsonDomain(msgspec.Struct):
    nodes: dict[str, _JsonNode]
    timestamp: str
    status: str


def render_json(view: DomainView, *, hostnames: bool = False) -> str:
    """The ``-N -j`` report: 4-space indented JSON, keys in the real tool's order."""
    document = _JsonDomain(
        nodes={
            str(node.index): _JsonNode(
                status=node.status.value,
                host=node.host,
                hostname=node.hostname if hostnames else None,
                connections={
                    str(column): _JsonConnection(
                        host=cell.host,
                        status=cell.status.value,
                        changed=cell.changed,
                        refused=cell.refused.value if cell.refused else None,
                    )
                    for column, cell in enumerate(node.connections)
                },
                changed=node.changed,
                version=node.version,
            )
            for node in view.nodes
        },
        timestamp=timestamp(view.taken_at),
        status=view.status.value,
    )
    return msgspec.json.format(msgspec.json.encode(document), indent=4).decode() + "\n"
