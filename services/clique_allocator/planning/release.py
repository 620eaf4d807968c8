"""Step 1 of a plan: release what the domain no longer needs (pure).

- A recorded pod keeps its seat (node and rank) while it lives (the same pod: a pod recreated
  under the same name, as a StatefulSet does, is a new pod; a seat of a record that predates
  uids takes the uid of the pod it holds) (a pod whose index names another
  free rank of its slice moves to it: records of the first release had no ranks); one that is
  gone or finished
  frees it, and so does one being deleted from a node that takes no new pods (it may stay
  Terminating as long as its node is down; its GPUs then count as held outside the record).
- Slots on a node that takes no new pods, or that no longer has the GPUs its reservations hold
  (a GPU left its allocatable), are dropped, except those of pods still seated there.
- The gang shrinks from its highest ranks: every slice's rank range is cut at the gang's size
  (but never below a seated pod's rank), and a slice left with no ranks is dropped, with its
  channel if no other slice of the domain uses that clique. The first slice stays, even empty,
  so the domain's next pods return to its clique.
- Free slots: the domain keeps room for as many more pods as the gang lacks, on its lowest free
  ranks; free slots beyond that go, from the nodes with the fewest seated pods first, then the
  highest tray slot.

The result also says how many pods each slice must hold (its target), for the engine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import msgspec

from services.clique_allocator.objects import finished
from services.clique_allocator.planning.slices import Seat, SliceHold
from shared.kube.models import Pod

NodeCheck = Callable[[str, str], bool]
"""(clique, node) -> whether the node is in that clique now and takes new pods."""


class Released(msgspec.Struct, frozen=True, kw_only=True):
    holds: tuple[SliceHold, ...]
    targets: Mapping[int, int]
    """Pods each slice must hold, by slice index."""


def release(
    holds: Sequence[SliceHold],
    *,
    pods: Mapping[str, Pod],
    ranks: Mapping[str, int],
    usable: NodeCheck,
    node_slot: Callable[[str], int],
    gang_pods: int,
) -> Released:
    """The domain's slices after releasing what it no longer needs (see module docstring)."""
    seated = [_honour_indexes(_keep_seats(h, pods=pods, usable=usable), ranks) for h in holds]
    top = max([gang_pods, *(seat.rank + 1 for h in seated for seat in h.seats.values())])
    trimmed = _cut_ranges(seated, top=top)
    budget = max(0, gang_pods - sum(len(hold.seats) for hold in trimmed))
    targets: dict[int, int] = {}
    for hold in trimmed:
        wanted = min(budget, len(hold.free_ranks()))
        budget -= wanted
        targets[hold.index] = len(hold.seats) + wanted
    kept = tuple(_drop_free_slots(h, keep=targets[h.index], node_slot=node_slot) for h in trimmed)
    return Released(holds=kept, targets=targets)


def _keep_seats(hold: SliceHold, *, pods: Mapping[str, Pod], usable: NodeCheck) -> SliceHold:
    seats: dict[str, Seat] = {}
    for name, seat in hold.seats.items():
        pod = pods.get(name)
        if pod is None or finished(pod) or not seat.holds(pod):
            continue
        if pod.metadata.deletion_timestamp is not None and not usable(hold.clique, seat.node):
            continue  # evicted from a failed node: its slot goes to the replacement
        # A seat of a record that predates uids learns its pod's: the IMEX agents grant a
        # channel only to the pod whose uid the seat records.
        seats[name] = seat if seat.uid else msgspec.structs.replace(seat, uid=pod.metadata.uid)
    slots = {}
    for node, count in hold.slots.items():
        pinned = sum(1 for seat in seats.values() if seat.node == node)
        slots[node] = max(count if usable(hold.clique, node) else 0, pinned)
    for seat in seats.values():
        slots.setdefault(seat.node, sum(1 for s in seats.values() if s.node == seat.node))
    return msgspec.structs.replace(hold, seats=seats, slots=slots)


def _honour_indexes(hold: SliceHold, ranks: Mapping[str, int]) -> SliceHold:
    """Seated pods whose index lies in the slice take it as their rank (where no pod without
    an index holds it); the others keep theirs, or the lowest rank left."""
    indexed = sorted(
        (ranks[name], name)
        for name in hold.seats
        if name in ranks and hold.first_rank <= ranks[name] < hold.end_rank
    )
    if all(hold.seats[name].rank == rank for rank, name in indexed):
        return hold
    names = {name for _, name in indexed}
    used = {seat.rank for name, seat in hold.seats.items() if name not in names}
    seats = dict(hold.seats)
    moved = []
    for rank, name in indexed:
        if rank in used:
            moved.append(name)
            continue
        seats[name] = msgspec.structs.replace(seats[name], rank=rank)
        used.add(rank)
    for name in moved:
        rank = seats[name].rank
        if rank in used:
            rank = next(
                r for r in range(hold.first_rank, hold.end_rank + len(seats)) if r not in used
            )
        seats[name] = msgspec.structs.replace(seats[name], rank=rank)
        used.add(rank)
    return msgspec.structs.replace(hold, seats=seats)


def _cut_ranges(holds: Sequence[SliceHold], *, top: int) -> list[SliceHold]:
    """Every rank range cut at ``top``; slices past it dropped, the first one kept."""
    kept: list[SliceHold] = []
    for hold in sorted(holds, key=lambda h: h.index):
        size = max(0, min(hold.size, top - hold.first_rank))
        if size == 0 and not hold.seats and kept:
            continue
        kept.append(msgspec.structs.replace(hold, size=size))
    return kept


def _drop_free_slots(hold: SliceHold, *, keep: int, node_slot: Callable[[str], int]) -> SliceHold:
    excess = hold.slot_count - keep
    if excess <= 0:
        return hold
    slots = dict(hold.slots)
    for node in sorted(slots, key=lambda n: (hold.pinned_on(n), -node_slot(n), n)):
        take = min(slots[node] - hold.pinned_on(node), excess)
        slots[node] -= take
        excess -= take
        if excess == 0:
            break
    return msgspec.structs.replace(hold, slots={n: c for n, c in slots.items() if c > 0})
