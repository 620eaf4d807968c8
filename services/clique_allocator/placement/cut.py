"""Cutting a gang larger than any clique into the fewest slices that fit now (pure).

The fewest slices: take cliques by most room first until their room adds up to the gang; that
count, ``k``, is the least any choice can do. Which cliques, then, is best fit: slice after
slice, the clique with the *least* room that still lets the rest be covered by the ``k``-less
remaining slices is filled completely (a full clique has nothing left to fragment), and the last
slice goes to the best-scoring clique that takes what is left, as a gang of that size would. So
a gang finishes off partly used cliques before it breaks into empty ones, and the roomiest
cliques are kept for whoever needs them next. Ties go to the lower clique id.

Only cliques with room for at least one pod and a channel for the domain take part.
"""

from __future__ import annotations

import itertools

import msgspec

from services.clique_allocator.placement.view import ClusterView


class Cut(msgspec.Struct, frozen=True, kw_only=True):
    """Cliques to fill completely, in slice order; the last slice takes ``rest`` pods."""

    full: tuple[str, ...]
    rest: int


class Shortfall(msgspec.Struct, frozen=True, kw_only=True):
    """The cliques together have room for ``room`` pods only, in ``cliques`` cliques."""

    room: int
    cliques: int


def fewest_slices(
    view: ClusterView, *, domain: str, pods: int, gpus_per_pod: int
) -> Cut | Shortfall:
    """How to cut ``pods`` pods of ``gpus_per_pod`` GPUs over cliques (see module docstring)."""
    rooms = {
        state.id: state.capacity(gpus_per_pod)
        for state in view.cliques
        if state.capacity(gpus_per_pod) > 0 and state.channel_for(domain) is not None
    }
    needed = _fewest(sorted(rooms.values(), reverse=True), pods)
    if needed is None:
        return Shortfall(room=sum(rooms.values()), cliques=len(rooms))
    full: list[str] = []
    remaining = pods
    for left in range(needed, 1, -1):
        chosen = _least_room_that_still_covers(rooms, remaining=remaining, slices=left)
        full.append(chosen)
        remaining -= rooms.pop(chosen)
    return Cut(full=tuple(full), rest=remaining)


def _fewest(rooms_descending: list[int], pods: int) -> int | None:
    """The fewest of these rooms, largest first, that add up to ``pods``; None if all don't."""
    for count, total in enumerate(itertools.accumulate(rooms_descending), start=1):
        if total >= pods:
            return count
    return None


def _least_room_that_still_covers(rooms: dict[str, int], *, remaining: int, slices: int) -> str:
    """The clique with the least room such that ``slices - 1`` others can take the rest."""
    descending = sorted(rooms.items(), key=lambda item: (-item[1], item[0]))
    position = {clique: index for index, (clique, _) in enumerate(descending)}
    prefix = [0, *itertools.accumulate(room for _, room in descending)]
    others = slices - 1
    for clique, room in sorted(rooms.items(), key=lambda item: (item[1], item[0])):
        best_others = prefix[others] if position[clique] >= others else prefix[others + 1] - room
        if room + best_others >= remaining:
            return clique
    raise AssertionError("a cover of this many slices exists, so some clique starts one")
