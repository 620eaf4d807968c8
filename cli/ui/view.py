"""What the page draws, as data: every rack's trays and GPUs, the legend of domains (pure).

:func:`page` turns the cached Nodes, ComputeDomains and Placements (and the faults the feed
reported first, :class:`~cli.ui.health.FeedFaults`) into :class:`Page`. The browser gets it as
JSON and draws it without computing anything of its own, so what a GPU shows is decided here.

A domain's GPUs on a tray are the ``gpus`` its Placement's slices hold on that node. Which GPU
*index* a pod got is the node's kubelet's to know (the PodResources API), not the API server's,
so the page draws a tray's held GPUs on its lowest healthy indexes, domain after domain in
legend order; a faulty GPU is drawn at its own index.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

import msgspec

from cli.ui.health import FAULTY, WARNING, FeedFaults, Mark, gpu_faults, tray_marks
from cli.ui.layout import NO_NVLINK, RackLayout, arrange, clique_of, slot_of
from shared.crds import ComputeDomain, Placement
from shared.crds.names import GPU_RESOURCE
from shared.crds.phase import domain_phase
from shared.kube.models import Node

FREE = "free"
HELD = "held"
PALETTE = (
    "#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00",
    "#7a5195", "#8c6d31", "#3f7f3f", "#b5446e", "#2f4b7c", "#a05195",
)  # fmt: skip
"""Domain colours (Okabe-Ito first); a domain also carries its legend number as text."""


class Gpu(msgspec.Struct, frozen=True, array_like=True):
    """``[state, domain, note]``: state free|held|faulty|warning; domain the legend number
    (0: none); note what the fault is."""

    state: str
    domain: int = 0
    note: str = ""


class Tray(msgspec.Struct, frozen=True, kw_only=True):
    node: str
    slot: int
    """Position in the rack (the tray index), from 0."""
    gpus: tuple[Gpu, ...]
    marks: tuple[Mark, ...] = ()


class Block(msgspec.Struct, frozen=True, kw_only=True):
    clique: str
    """The clique id (``<cluster UUID>.<clique id>``); "" for a rack without one."""
    trays: tuple[Tray | None, ...]


class Rack(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    title: str
    blocks: tuple[Block, ...]


class LegendEntry(msgspec.Struct, frozen=True, kw_only=True):
    number: int
    namespace: str
    name: str
    colour: str
    phase: str
    reason: str = ""
    gpus: int = 0
    """GPUs its Placement holds."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class Page(msgspec.Struct, kw_only=True):
    racks: list[Rack] = msgspec.field(default_factory=list)
    legend: list[LegendEntry] = msgspec.field(default_factory=list)


def legend(domains: Iterable[ComputeDomain], placements: Iterable[Placement]) -> list[LegendEntry]:
    """One entry per domain (and per Placement whose domain is gone), by namespace and name."""
    held: dict[str, int] = defaultdict(int)
    for placement in placements:
        for piece in placement.spec.all_slices:
            held[placement.key] += sum(member.gpus for member in piece.members)
    by_key = {domain.key: domain for domain in domains}
    entries = []
    for number, key in enumerate(sorted({*by_key, *held}), start=1):
        namespace, _, name = key.partition("/")
        domain = by_key.get(key)
        phase, reason = domain_phase(domain) if domain is not None else ("Deleted", "")
        entries.append(
            LegendEntry(
                number=number,
                namespace=namespace,
                name=name,
                colour=PALETTE[(number - 1) % len(PALETTE)],
                phase=phase,
                reason=reason,
                gpus=held.get(key, 0),
            )
        )
    return entries


def holdings(
    placements: Iterable[Placement], numbers: Mapping[str, int]
) -> dict[str, list[tuple[int, int]]]:
    """Node -> ``(legend number, GPUs)`` of each domain holding GPUs there, in legend order."""
    held: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for placement in placements:
        number = numbers.get(placement.key, 0)
        for piece in placement.spec.all_slices:
            for member in piece.members:
                if member.gpus:
                    held[member.node][number] += member.gpus
    return {node: sorted(by_domain.items()) for node, by_domain in held.items()}


def node_gpus(node: Node) -> int:
    """GPUs the node has: its capacity of ``nvidia.com/gpu`` (allocatable drops when one is
    unhealthy; capacity does not)."""
    for amounts in (node.status.capacity, node.status.allocatable):
        text = amounts.get(GPU_RESOURCE, "")
        if text.isdigit():
            return int(text)
    return 0


def tray(
    node: Node, position: int, held: Sequence[tuple[int, int]], feed: FeedFaults | None = None
) -> Tray:
    """One tray: its GPUs (faults at their index, held GPUs on the lowest healthy ones) and
    marks."""
    faults = gpu_faults(node)
    notes: dict[int, str] = {}
    node_wide: list[str] = []
    for reported in feed.of(node.metadata.name) if feed is not None else ():
        state = FAULTY if reported.severity == "fatal" else WARNING
        if reported.gpu is None:
            node_wide.append(reported.message)
        elif faults.get(reported.gpu) != FAULTY:
            faults[reported.gpu] = state
            notes[reported.gpu] = reported.message
    count = max(node_gpus(node), sum(gpus for _, gpus in held), *(i + 1 for i in faults))
    owners: list[int] = [number for number, gpus in held for _ in range(gpus)]
    order = sorted(range(count), key=lambda i: (faults.get(i) == FAULTY, i))
    owner_of = dict(zip(order, owners, strict=False))
    gpus = []
    for index in range(count):
        owner = owner_of.get(index, 0)
        state = faults.get(index) or (HELD if owner else FREE)
        gpus.append(Gpu(state, owner, notes.get(index, "")))
    faulty = [i for i, state in faults.items() if state == FAULTY]
    marks = tray_marks(node, faulty_gpus=faulty)
    if node_wide and not any(mark.code == "F" for mark in marks):
        marks.insert(0, Mark("F", "fault reported on the feed: " + "; ".join(node_wide)))
    return Tray(
        node=node.metadata.name,
        slot=position if (slot := slot_of(node)) is None else slot,
        gpus=tuple(gpus),
        marks=tuple(marks),
    )


def rack_name(names: Sequence[str]) -> str:
    """What the rack's node names share before their tray part (``rack-0`` of ``rack-0-tray00``
    .. ``rack-0-tray17``, ``gb200-r0`` of ``gb200-r0-t03``); "" when they share nothing."""
    if not names:
        return ""
    prefix = names[0]
    for name in names[1:]:
        while not name.startswith(prefix):
            prefix = prefix[:-1]
    if len(names) > 1:
        # The tray part starts after the last separator: rack-0-tray -> rack-0.
        head, separator, _tail = prefix.rpartition("-")
        prefix = head if separator else prefix
    return prefix.rstrip("-_.")


def rack_title(layout: RackLayout) -> str:
    names = sorted(node.metadata.name for node in layout.nodes)
    trays = f"{len(names)} tray{'s' if len(names) != 1 else ''}"
    if layout.id == NO_NVLINK:
        return f"without multi-node NVLink, {trays}"
    name = rack_name(names) or f"{names[0]} .. {names[-1]}"
    return f"{name}, {trays}, NVLink domain {layout.id[:8]}"


def rack(
    layout: RackLayout, held: Mapping[str, list[tuple[int, int]]], feed: FeedFaults | None
) -> Rack:
    position = 0
    blocks = []
    for block in layout.blocks:
        trays: list[Tray | None] = []
        for node in block.trays:
            trays.append(
                None
                if node is None
                else tray(node, position, held.get(node.metadata.name, ()), feed)
            )
            position += 1
        blocks.append(Block(clique=block.clique, trays=tuple(trays)))
    return Rack(id=layout.id or "no-nvlink", title=rack_title(layout), blocks=tuple(blocks))


def page(
    nodes: Iterable[Node],
    domains: Iterable[ComputeDomain],
    placements: Iterable[Placement],
    feed: FeedFaults | None = None,
) -> Page:
    placements = list(placements)
    entries = legend(domains, placements)
    held = holdings(placements, {entry.key: entry.number for entry in entries})
    return Page(racks=[rack(layout, held, feed) for layout in arrange(nodes)], legend=entries)


__all__ = ["FREE", "HELD", "Page", "Rack", "Tray", "clique_of", "page"]
