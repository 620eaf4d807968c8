"""Step 3 of a plan: seat waiting pods in free slots, by rank (pure).

- A pod with an index (``ranks``) whose rank lies in a slice and is not taken goes to that
  slice, so consecutive ranks share a slice; a replacement pod thereby returns to its rank's
  slice. Within a slice, pods in rank order take the free slots in tray-slot order.
- Every other pod (no index, or one no slice covers or another pod holds) takes the first free
  slot of the lowest slice that has one, in creation order, with that slice's lowest free rank.
- A pod that finds no free slot is left over, for step 4 (hold).

A seat is recorded before its pod is pinned, so a pinned pod is never forgotten.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime

import msgspec

from services.clique_allocator.planning.slices import Seat, SliceHold
from shared.kube.models import Pod

_EPOCH = datetime.min.replace(tzinfo=UTC)


class Seated(msgspec.Struct, frozen=True, kw_only=True):
    holds: tuple[SliceHold, ...]
    seated: Mapping[str, Seat]
    """The pods seated now, by name."""
    left: tuple[Pod, ...]


def seat_pods(
    holds: Sequence[SliceHold],
    *,
    waiting: Sequence[Pod],
    ranks: Mapping[str, int],
    node_slot: Callable[[str], int],
) -> Seated:
    """Seat ``waiting`` pods in the slices' free slots (see the module docstring)."""
    seats = {hold.index: dict(hold.seats) for hold in holds}
    by_index = {hold.index: hold for hold in holds}
    taken = {seat.rank for hold in holds for seat in hold.seats.values()}
    seated: dict[str, Seat] = {}
    unranked: list[Pod] = []
    for pod in sorted(waiting, key=lambda p: (ranks.get(p.metadata.name, -1), _created(p))):
        rank = ranks.get(pod.metadata.name)
        home = _slice_of(holds, rank) if rank is not None and rank not in taken else None
        if home is None or rank is None:
            unranked.append(pod)
            continue
        node = _free_node(by_index[home], seats[home], node_slot)
        if node is None:
            unranked.append(pod)
            continue
        seat = Seat(node=node, rank=rank, uid=pod.metadata.uid)
        seats[home][pod.metadata.name] = seated[pod.metadata.name] = seat
        taken.add(rank)
    left: list[Pod] = []
    for pod in sorted(unranked, key=_created):
        found = _first_free_seat(holds, seats, taken, node_slot)
        if found is None:
            left.append(pod)
            continue
        index, free = found
        seat = Seat(node=free.node, rank=free.rank, uid=pod.metadata.uid)
        seats[index][pod.metadata.name] = seated[pod.metadata.name] = seat
        taken.add(seat.rank)
    updated = tuple(msgspec.structs.replace(h, seats=seats[h.index]) for h in holds)
    return Seated(holds=updated, seated=seated, left=tuple(left))


def _created(pod: Pod) -> tuple[datetime, str]:
    return (pod.metadata.creation_timestamp or _EPOCH, pod.metadata.name)


def _slice_of(holds: Sequence[SliceHold], rank: int) -> int | None:
    return next((h.index for h in holds if h.first_rank <= rank < h.end_rank), None)


def _free_node(
    hold: SliceHold, seats: Mapping[str, Seat], node_slot: Callable[[str], int]
) -> str | None:
    for node in sorted(hold.slots, key=lambda n: (node_slot(n), n)):
        if hold.slots[node] > sum(1 for seat in seats.values() if seat.node == node):
            return node
    return None


def _first_free_seat(
    holds: Sequence[SliceHold],
    seats: Mapping[int, Mapping[str, Seat]],
    taken: set[int],
    node_slot: Callable[[str], int],
) -> tuple[int, Seat] | None:
    for hold in holds:
        node = _free_node(hold, seats[hold.index], node_slot)
        if node is None:
            continue
        rank = next((r for r in range(hold.first_rank, hold.end_rank) if r not in taken), None)
        if rank is not None:
            return hold.index, Seat(node=node, rank=rank)
    return None
