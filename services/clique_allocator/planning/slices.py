"""A domain's slices as the plan works on them, read from and written back to its Placement.

A :class:`SliceHold` is one slice: its clique and channel, the ranks it covers
(``first_rank .. first_rank + size - 1``), the pod slots it holds per node, and the pods pinned
in it with their node and rank. The plan's steps turn one list of holds into the next; the
record and the engine's reservations are both derived from the holds, so the two never
disagree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

import msgspec

from services.clique_allocator.placement import NodeShare, Reservation
from shared.crds.placement import (
    PlacedPod,
    PlacementSlice,
    PlacementSpec,
    PodRef,
    SliceMember,
)
from shared.kube.models import Pod


class Seat(msgspec.Struct, frozen=True, kw_only=True):
    """Where a pinned pod sits: its node and its rank in the gang (and which pod of that name:
    "" when the record predates uids)."""

    node: str
    rank: int
    uid: str = ""

    def holds(self, pod: Pod) -> bool:
        """Whether the seat is this pod's, not an earlier pod's of the same name."""
        return not self.uid or self.uid == pod.metadata.uid


class SliceHold(msgspec.Struct, frozen=True, kw_only=True):
    index: int
    clique: str
    channel: int
    first_rank: int = 0
    size: int = 0
    slots: Mapping[str, int] = msgspec.field(default_factory=dict)
    """Pod slots held per node (pinned or free)."""
    seats: Mapping[str, Seat] = msgspec.field(default_factory=dict)
    """Pinned pods by name."""
    waiting_since: datetime | None = None
    """Since when the slice cannot be made whole in its clique (``planning/failover.py``)."""
    moved_from: str = ""
    moved_at: datetime | None = None

    @property
    def end_rank(self) -> int:
        """One past the slice's highest rank."""
        return self.first_rank + self.size

    @property
    def slot_count(self) -> int:
        return sum(self.slots.values())

    def pinned_on(self, node: str) -> int:
        return sum(1 for seat in self.seats.values() if seat.node == node)

    def free_ranks(self) -> list[int]:
        taken = {seat.rank for seat in self.seats.values()}
        return [rank for rank in range(self.first_rank, self.end_rank) if rank not in taken]


def holds_of(spec: PlacementSpec) -> list[SliceHold]:
    """The record's slices (a first-release record read as one slice)."""
    return [
        SliceHold(
            index=piece.index,
            clique=piece.clique,
            channel=piece.channel,
            first_rank=piece.first_rank,
            size=piece.size,
            slots={
                member.node: member.gpus // spec.gpus_per_pod
                for member in piece.members
                if spec.gpus_per_pod > 0 and member.gpus >= spec.gpus_per_pod
            },
            seats={
                pod.name: Seat(node=member.node, rank=pod.rank, uid=pod.uid)
                for member in piece.members
                for pod in member.pods
            },
            waiting_since=piece.waiting_since,
            moved_from=piece.moved_from,
            moved_at=piece.moved_at,
        )
        for piece in sorted(spec.all_slices, key=lambda p: p.index)
    ]


def reservation_of(domain: str, hold: SliceHold, *, gpus_per_pod: int) -> Reservation:
    """The engine's reservation for one slice (of a domain whose pods take no GPU yet
    (``gpus_per_pod`` 0): its clique and channel only)."""
    return Reservation(
        domain=domain,
        slice_index=hold.index,
        clique=hold.clique,
        channel=hold.channel,
        gpus_per_pod=max(1, gpus_per_pod),
        shares=tuple(
            NodeShare(node=node, pods=count) for node, count in sorted(hold.slots.items()) if count
        ),
    )


def reservations_of(domain: str, spec: PlacementSpec) -> list[Reservation]:
    """The engine's reservations for a recorded Placement, one per slice."""
    return [reservation_of(domain, hold, gpus_per_pod=spec.gpus_per_pod) for hold in holds_of(spec)]


def record_of(
    holds: Sequence[SliceHold],
    *,
    gpus_per_pod: int,
    size: int,
    slice_size: int | None,
    node_slots: Mapping[str, int],
    evicting: Sequence[PodRef] = (),
) -> PlacementSpec:
    """The Placement spec for ``holds``; ``node_slots`` gives each node's IMEX slot."""
    return PlacementSpec(
        gpus_per_pod=gpus_per_pod,
        size=size,
        slice_size=slice_size,
        evicting=tuple(sorted(evicting, key=lambda ref: (ref.name, ref.uid))),
        slices=tuple(
            _slice_record(hold, gpus_per_pod=gpus_per_pod, node_slots=node_slots)
            for hold in sorted(holds, key=lambda h: h.index)
        ),
    )


def _slice_record(
    hold: SliceHold, *, gpus_per_pod: int, node_slots: Mapping[str, int]
) -> PlacementSlice:
    by_node: dict[str, list[PlacedPod]] = {}
    for name, seat in hold.seats.items():
        by_node.setdefault(seat.node, []).append(PlacedPod(name=name, rank=seat.rank, uid=seat.uid))
    members = [
        SliceMember(
            node=node,
            slot=node_slots.get(node, 0),
            gpus=count * gpus_per_pod,
            pods=tuple(sorted(by_node.get(node, ()), key=lambda pod: (pod.rank, pod.name))),
        )
        for node, count in hold.slots.items()
        if count > 0
    ]
    members.sort(key=lambda member: (member.slot, member.node))
    return PlacementSlice(
        index=hold.index,
        clique=hold.clique,
        channel=hold.channel,
        first_rank=hold.first_rank,
        size=hold.size,
        waiting_since=hold.waiting_since,
        moved_from=hold.moved_from,
        moved_at=hold.moved_at,
        members=tuple(members),
    )
