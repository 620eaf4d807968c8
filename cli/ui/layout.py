"""Where each node sits on the page: racks (NVLink domains), cliques inside a rack, trays in
slot order (pure).

A **rack** is an NVLink domain, the GPUs sharing one fabric ``clusterUuid`` (an NVL72 rack). A
node's rack is read from, in order: the health monitor's ``cdo.dev/nvlink-domain`` label, the
cluster UUID in its ``nvidia.com/gpu.clique`` label (GPU Feature Discovery's), and the clique the
IMEX agent last wrote its slot for (``cdo.dev/imex-clique``), so a node whose clique labels the
monitor took away after a fabric fault stays drawn in its rack. A node with none of them is in
the group of nodes without multi-node NVLink.

A node's **tray** position is the IMEX agent's ``cdo.dev/imex-slot`` (the tray index NVML's
platform info gives); trays without one follow in name order in the first free positions. A
rack split into several cliques is drawn as one block per clique, in the order of their first
tray, so the clique boundaries show.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

import msgspec

from shared.crds.names import (
    CLIQUE_LABEL,
    IMEX_CLIQUE_ANNOTATION,
    IMEX_SLOT_ANNOTATION,
    NVLINK_DOMAIN_LABEL,
)
from shared.kube.models import Node

NO_NVLINK = ""
"""The rack id of the nodes without multi-node NVLink."""


class CliqueBlock(msgspec.Struct, frozen=True, kw_only=True):
    """The trays of one clique inside a rack, ``None`` where no node holds the position."""

    clique: str
    trays: tuple[Node | None, ...]


class RackLayout(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    """The NVLink domain's cluster UUID; :data:`NO_NVLINK` for nodes without one."""
    blocks: tuple[CliqueBlock, ...]

    @property
    def nodes(self) -> list[Node]:
        return [tray for block in self.blocks for tray in block.trays if tray is not None]


def clique_of(node: Node) -> str:
    """The node's clique: its label, else the clique the IMEX agent last wrote its slot for."""
    labels = node.metadata.labels
    return labels.get(CLIQUE_LABEL) or node.metadata.annotations.get(IMEX_CLIQUE_ANNOTATION, "")


def rack_of(node: Node) -> str:
    """The NVLink domain (cluster UUID) the node belongs to, :data:`NO_NVLINK` when unknown."""
    labelled = node.metadata.labels.get(NVLINK_DOMAIN_LABEL)
    if labelled:
        return labelled
    clique = clique_of(node)
    return clique.rpartition(".")[0] if "." in clique else NO_NVLINK


def slot_of(node: Node) -> int | None:
    text = node.metadata.annotations.get(IMEX_SLOT_ANNOTATION, "")
    return int(text) if text.isdigit() else None


def _positions(nodes: Sequence[Node]) -> list[Node | None]:
    """Nodes at their slots; nodes without one (or on a slot taken) in the free positions."""
    slots = [slot for node in nodes if (slot := slot_of(node)) is not None]
    positions: list[Node | None] = [None] * max(len(nodes), max(slots, default=-1) + 1)
    rest: list[Node] = []
    for node in sorted(nodes, key=lambda n: n.metadata.name):
        slot = slot_of(node)
        if slot is not None and positions[slot] is None:
            positions[slot] = node
        else:
            rest.append(node)
    free = (i for i, held in enumerate(positions) if held is None)
    for node in rest:
        positions[next(free)] = node
    return positions


def _blocks(nodes: Sequence[Node]) -> tuple[CliqueBlock, ...]:
    positions = _positions(nodes)
    # An empty position belongs to the clique of the tray before it (or after it, at the top).
    cliques = [clique_of(tray) if tray is not None else None for tray in positions]
    known = next((c for c in cliques if c is not None), "")
    for i, clique in enumerate(cliques):
        known = clique if clique is not None else known
        cliques[i] = known
    blocks: list[tuple[str, list[Node | None]]] = []
    for tray, clique in zip(positions, cliques, strict=True):
        if not blocks or blocks[-1][0] != clique:
            blocks.append((clique or "", []))
        blocks[-1][1].append(tray)
    return tuple(CliqueBlock(clique=clique, trays=tuple(trays)) for clique, trays in blocks)


def arrange(nodes: Iterable[Node]) -> list[RackLayout]:
    """Every node in its rack and tray; racks in the order of their first node's name, the
    nodes without NVLink last."""
    racks: dict[str, list[Node]] = defaultdict(list)
    for node in nodes:
        racks[rack_of(node)].append(node)
    layouts = [RackLayout(id=rack, blocks=_blocks(members)) for rack, members in racks.items()]
    return sorted(
        layouts,
        key=lambda r: (r.id == NO_NVLINK, min((n.metadata.name for n in r.nodes), default="")),
    )
