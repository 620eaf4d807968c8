"""The placement decision: where a domain's new pods go, slice by slice, and on which channel.

``place(view, request)`` places what the domain asks for beyond what it holds, in this order:

0. **moves** (failover): a slice the domain holds is dropped and placed again, whole, in the
   best-scoring clique other than its own, under the same index;
1. **targets**: a slice the domain holds that must hold more pods (a replacement, growth inside
   a fixed-size slice) grows in its own clique or not at all (``CliqueFull``,
   ``CliqueUnavailable``); a slice never moves cliques;
2. **the last slice first** (``extend_last``): it takes as many new pods as its clique has room
   for, so that consecutive ranks stay together;
3. **new slices** for the remaining new pods: fixed-size slices (``slice_pods``) each go to the
   clique that scores best (``score``); without a fixed size, pods that fit the largest clique go
   to one slice in the best-scoring clique with room (or wait for one), and more are cut into
   the fewest slices that fit (``cut``). Where inside a clique a slice goes is ``slice.py``'s.

A gang whose pods' constraints rule out or cap nodes (``request.limits``) is placed on the
view those limits leave (``limits.py``). All or nothing: if any step fails, nothing is placed
and the reason names the slice. A domain's channel in a clique is the one it already has
there (any of its slices), else the clique's lowest free one. Decisions depend only on the
view and the request (every order is by explicit keys), so the same input always gives the
same output.
"""

from __future__ import annotations

import msgspec

from services.clique_allocator.placement import messages
from services.clique_allocator.placement.cut import Shortfall, fewest_slices
from services.clique_allocator.placement.decision import (
    Decision,
    NotPlaced,
    Placed,
    Reason,
    SlicePlacement,
)
from services.clique_allocator.placement.layout import new_slice_sizes, request_problem
from services.clique_allocator.placement.model import GangRequest
from services.clique_allocator.placement.slice import (
    SliceOutcome,
    fill_into,
    grow,
    not_placed,
    place_new,
)
from services.clique_allocator.placement.view import ClusterView


class _Progress:
    """The slices decided so far, and the view with them applied.

    The view is advanced lazily: only when a later step reads it, and then once for every slice
    added since (a cut into k slices rebuilds its cliques once, not k times).
    """

    def __init__(self, view: ClusterView, request: GangRequest) -> None:
        self.request = request
        self._view = view
        self._stale = False
        self.by_slice = {r.slice_index: r for r in view.reservations_of(request.domain)}
        self.placed: list[SlicePlacement] = []
        self.slices = len(self.by_slice)
        """Slices the domain will have, for messages."""
        self.extended = 0
        """New pods the domain's last slice took before new slices open."""

    @property
    def view(self) -> ClusterView:
        if self._stale:
            self._view = self._view.with_domain(self.request.domain, self.by_slice.values())
            self._stale = False
        return self._view

    def add(self, outcome: SliceOutcome) -> None:
        reservation, placement = outcome
        self.by_slice[reservation.slice_index] = reservation
        self.placed.append(placement)
        self._stale = True

    def drop(self, slice_index: int) -> None:
        """The slice's reservation is gone (it moves): the view forgets it."""
        self.by_slice.pop(slice_index, None)
        self._stale = True

    def next_index(self) -> int:
        return max(self.by_slice, default=-1) + 1

    def excluded(self, slice_index: int) -> frozenset[str]:
        """Nodes of the domain's other slices: with a span, slices never share a node."""
        if self.request.span is None:
            return frozenset()
        return frozenset(
            share.node
            for index, reservation in self.by_slice.items()
            if index != slice_index
            for share in reservation.shares
        )

    def failed(self, outcome: NotPlaced, slice_index: int) -> NotPlaced:
        message = messages.in_slice(
            outcome.message, slice_index=slice_index, slices=max(self.slices, slice_index + 1)
        )
        return NotPlaced(domain=self.request.domain, reason=outcome.reason, message=message)

    def result(self) -> Placed:
        return Placed(
            domain=self.request.domain,
            slices=tuple(self.placed),
            reservations=tuple(self.by_slice[index] for index in sorted(self.by_slice)),
        )


def place(view: ClusterView, request: GangRequest) -> Decision:
    """Place the domain's pods beyond those it holds, or say why not (see module docstring).

    With ``request.limits`` the gang is placed on the view its limits leave
    (:meth:`ClusterView.restricted`). When that fails and the cluster without the limits would
    have room for it (:func:`_room_without`), the constraints are why it waits
    (``PodConstraints``, the message naming them); if not, the reason stays and the message
    mentions them too.
    """
    limits = request.limits
    if limits is None or not limits.nodes:
        return _place(view, request)
    decision = _place(
        view.restricted(request.domain, limits, gpus_per_pod=request.gpus_per_pod), request
    )
    if not isinstance(decision, NotPlaced) or not limits.why:
        return decision
    if not _room_without(view, request):
        message = messages.also_constrained(why=limits.why, message=decision.message)
        return msgspec.structs.replace(decision, message=message)
    message = messages.constrained(why=limits.why, message=decision.message)
    return NotPlaced(domain=request.domain, reason=Reason.POD_CONSTRAINTS, message=message)


def _room_without(view: ClusterView, request: GangRequest) -> bool:
    """Whether the gang would be placed without its limits. A gang that only asks for new pods
    in the usual way is judged by the cliques' room (one clique with room for all of it, or,
    for a gang larger than any clique, room enough in all), which costs a few lookups; any
    other request is placed for real."""
    if request.targets or request.moves or request.span is not None or request.extend_last:
        free = _place(view, msgspec.structs.replace(request, limits=None))
        return not isinstance(free, NotPlaced)
    gpus = request.gpus_per_pod
    pods = request.new_pods
    room = view.most_room(gpus)
    largest = view.largest_clique(gpus)
    if room is None or largest is None:
        return False
    wanted = pods if request.slice_pods is None else min(pods, request.slice_pods)
    if wanted <= largest[0]:
        return room[0] >= wanted
    return sum(state.capacity(gpus) for state in view.cliques) >= pods


def _place(view: ClusterView, request: GangRequest) -> Decision:
    held = view.reservations_of(request.domain)
    problem = request_problem(request, node_sizes=view.node_sizes, held=held)
    if problem is not None:
        return NotPlaced(domain=request.domain, reason=Reason.INVALID_REQUEST, message=problem)
    progress = _Progress(view, request)
    failure = _move_slices(progress) or _reach_targets(progress) or _extend_last(progress)
    if failure is None:
        failure = _open_new_slices(progress)
    return failure if failure is not None else progress.result()


def _move_slices(progress: _Progress) -> NotPlaced | None:
    request = progress.request
    for move in sorted(request.moves, key=lambda m: m.slice_index):
        old = progress.by_slice.get(move.slice_index)
        if old is None:
            return not_placed(
                request.domain,
                Reason.INVALID_REQUEST,
                f"domain {request.domain} holds no slice {move.slice_index} to move",
            )
        progress.drop(move.slice_index)
        outcome = place_new(
            progress.view,
            request=request,
            slice_index=move.slice_index,
            wanted=move.pods,
            excluded=progress.excluded(move.slice_index),
            skip=frozenset({old.clique}),
        )
        if isinstance(outcome, NotPlaced):
            return progress.failed(outcome, move.slice_index)
        progress.add(outcome)
    return None


def _reach_targets(progress: _Progress) -> NotPlaced | None:
    request = progress.request
    for target in sorted(request.targets, key=lambda t: t.slice_index):
        current = progress.by_slice[target.slice_index]
        wanted = target.pods - current.pods
        if wanted <= 0:
            continue
        excluded = progress.excluded(target.slice_index)
        outcome = grow(progress.view, current, wanted=wanted, span=request.span, excluded=excluded)
        if isinstance(outcome, NotPlaced):
            return progress.failed(outcome, target.slice_index)
        progress.add(outcome)
    return None


def _extend_last(progress: _Progress) -> NotPlaced | None:
    request = progress.request
    if not request.extend_last or not request.new_pods or not progress.by_slice:
        return None
    last = progress.by_slice[max(progress.by_slice)]
    state = progress.view.clique(last.clique)
    take = 0 if state is None else min(request.new_pods, state.capacity(request.gpus_per_pod))
    if take == 0:
        return None
    outcome = grow(progress.view, last, wanted=take, span=None, excluded=frozenset())
    if isinstance(outcome, NotPlaced):  # pragma: no cover - the clique was just seen to have room
        return progress.failed(outcome, last.slice_index)
    progress.add(outcome)
    progress.extended = take
    return None


def _open_new_slices(progress: _Progress) -> NotPlaced | None:
    request = progress.request
    rest = request.new_pods - progress.extended
    if rest <= 0:
        return None
    largest = progress.view.largest_clique(request.gpus_per_pod)
    # A span is shared among a known number of slices, so it is never cut automatically: such
    # a gang larger than the largest clique's room waits for room in one slice.
    cut = request.slice_pods is None and request.span is None
    if cut and largest is not None and rest > largest[0]:
        return _cut_into_fewest(progress, rest)
    sizes = new_slice_sizes(rest, request.slice_pods)
    progress.slices += len(sizes)
    for pods in sizes:
        index = progress.next_index()
        outcome = place_new(
            progress.view,
            request=request,
            slice_index=index,
            wanted=pods,
            excluded=progress.excluded(index),
        )
        if isinstance(outcome, NotPlaced):
            return progress.failed(outcome, index)
        progress.add(outcome)
    return None


def _cut_into_fewest(progress: _Progress, pods: int) -> NotPlaced | None:
    request = progress.request
    gpus = request.gpus_per_pod
    cut = fewest_slices(progress.view, domain=request.domain, pods=pods, gpus_per_pod=gpus)
    if isinstance(cut, Shortfall):
        return _short(progress.view, request=request, pods=pods, shortfall=cut)
    progress.slices += len(cut.full) + 1
    before = progress.view  # each full slice is in a clique of its own: one view serves them all
    for clique in cut.full:
        state = before.clique(clique)
        assert state is not None  # the cut was made on this very view
        index = progress.next_index()
        progress.add(fill_into(state, request, slice_index=index, pods=state.capacity(gpus)))
    index = progress.next_index()
    # The last slice goes to another clique than the full ones, so the view before them serves.
    outcome = place_new(
        before,
        request=request,
        slice_index=index,
        wanted=cut.rest,
        excluded=frozenset(),
        skip=frozenset(cut.full),
    )
    if isinstance(outcome, NotPlaced):  # pragma: no cover - the cut left a clique with room
        return progress.failed(outcome, index)
    progress.add(outcome)
    return None


def _short(
    view: ClusterView, *, request: GangRequest, pods: int, shortfall: Shortfall
) -> NotPlaced:
    gpus = request.gpus_per_pod
    empty = sum(state.size_capacity(gpus)[0] for state in view.cliques)
    if empty < pods:
        message = messages.larger_than_cluster(
            pods=pods, gpus_per_pod=gpus, room=empty, cliques=len(view.cliques)
        )
        return not_placed(request.domain, Reason.LARGER_THAN_CLUSTER, message)
    message = messages.no_room_together(
        pods=pods, gpus_per_pod=gpus, room=shortfall.room, cliques=shortfall.cliques
    )
    return not_placed(request.domain, Reason.INSUFFICIENT_CAPACITY, message)
