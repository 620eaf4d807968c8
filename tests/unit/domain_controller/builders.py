"""Small builders of status facts for the unit tables.

Placements are built in the slice shape the allocator writes; :func:`legacy_placement` builds
the first release's one-clique shape, for the tests about reading it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from services.domain_controller.facts import DomainFacts, NodeFacts, PodFacts
from shared.crds.placement import (
    LegacyMember,
    PlacedPod,
    PlacementSlice,
    PlacementSpec,
    SliceMember,
)

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
EARLIER = datetime(2026, 5, 1, 11, 0, 0, tzinfo=UTC)
CLIQUE = "9e1c3a52-0000-4000-8000-00000000c0de.2"
CLIQUE_B = "9e1c3a52-0000-4000-8000-00000000c0de.5"
GPUS_PER_POD = 2

Members = Sequence[tuple[str, tuple[str, ...]]]
"""(node, pod names); slots follow the order given."""


def slice_of(
    members: Members,
    *,
    index: int = 0,
    clique: str = CLIQUE,
    channel: int = 7,
    first_rank: int = 0,
    size: int | None = None,
    reserved: Mapping[str, int] | None = None,
    first_slot: int = 0,
) -> PlacementSlice:
    """One slice; its pods get consecutive ranks from ``first_rank`` in the order given.
    ``reserved``: pods a node holds room for (default: its pods)."""
    room = reserved or {}
    rank = first_rank
    built = []
    for slot, (node, pods) in enumerate(members, start=first_slot):
        placed = []
        for name in pods:
            placed.append(PlacedPod(name=name, rank=rank))
            rank += 1
        built.append(
            SliceMember(
                node=node,
                slot=slot,
                gpus=GPUS_PER_POD * room.get(node, len(pods)),
                pods=tuple(placed),
            )
        )
    return PlacementSlice(
        index=index,
        clique=clique,
        channel=channel,
        first_rank=first_rank,
        size=rank - first_rank if size is None else size,
        members=tuple(built),
    )


def sliced(*slices: PlacementSlice, size: int | None = None) -> PlacementSpec:
    """A placement of these slices; the gang is as large as they are unless ``size`` says."""
    return PlacementSpec(
        gpus_per_pod=GPUS_PER_POD,
        size=sum(piece.size for piece in slices) if size is None else size,
        slices=slices,
    )


def placement(
    *members: tuple[str, tuple[str, ...]],
    size: int | None = None,
    reserved: Mapping[str, int] | None = None,
) -> PlacementSpec:
    """A domain in one slice (one clique, channel 7)."""
    piece = slice_of(members, reserved=reserved)
    return sliced(piece, size=size)


def legacy_placement(
    *members: tuple[str, tuple[str, ...]], size: int | None = None
) -> PlacementSpec:
    """The same domain as :func:`placement`, as the first release recorded it."""
    return PlacementSpec(
        clique=CLIQUE,
        channel=7,
        gpus_per_pod=GPUS_PER_POD,
        size=sum(len(pods) for _, pods in members) if size is None else size,
        members=tuple(
            LegacyMember(node=node, slot=slot, gpus=GPUS_PER_POD * len(pods), pods=pods)
            for slot, (node, pods) in enumerate(members)
        ),
    )


def node(name: str, **fields: Any) -> NodeFacts:
    defaults: dict[str, Any] = {
        "address": f"10.0.0.{len(name)}",
        "imex": "True",
        "imex_reason": "ImexReady",
        "kubelet_ready": "True",
    }
    return NodeFacts(name=name, **{**defaults, **fields})


def pod(name: str, on: str, phase: str = "Running") -> PodFacts:
    return PodFacts(name=name, node=on, phase=phase)


TWO_NODES = placement(("n1", ("p1", "p2")), ("n2", ("p3",)))
PODS_RUNNING = (pod("p1", "n1"), pod("p2", "n1"), pod("p3", "n2"))
NODES_OK = {"n1": node("n1"), "n2": node("n2")}

# A gang of 6 in two slices of 3 pods, one per clique: slice 0 on a1, a2 (clique A), slice 1
# on b1, b2 (clique B); each clique gives the domain channel 7 and 2 respectively.
TWO_SLICES = sliced(
    slice_of([("a1", ("p0", "p1")), ("a2", ("p2",))], index=0, clique=CLIQUE, channel=7),
    slice_of(
        [("b1", ("p3", "p4")), ("b2", ("p5",))],
        index=1,
        clique=CLIQUE_B,
        channel=2,
        first_rank=3,
    ),
)
TWO_SLICES_PODS = (
    pod("p0", "a1"),
    pod("p1", "a1"),
    pod("p2", "a2"),
    pod("p3", "b1"),
    pod("p4", "b1"),
    pod("p5", "b2"),
)
TWO_SLICES_NODES = {name: node(name) for name in ("a1", "a2", "b1", "b2")}


def facts(**fields: Any) -> DomainFacts:
    """Facts of a healthy, placed, running two-node domain, with ``fields`` changed."""
    defaults: dict[str, Any] = {
        "generation": 3,
        "placement": TWO_NODES,
        "pods": PODS_RUNNING,
        "nodes": NODES_OK,
    }
    return DomainFacts(**{**defaults, **fields})


def two_slice_facts(**fields: Any) -> DomainFacts:
    """Facts of the healthy, running :data:`TWO_SLICES` domain, with ``fields`` changed."""
    defaults: dict[str, Any] = {
        "generation": 3,
        "placement": TWO_SLICES,
        "pods": TWO_SLICES_PODS,
        "nodes": TWO_SLICES_NODES,
    }
    return DomainFacts(**{**defaults, **fields})
