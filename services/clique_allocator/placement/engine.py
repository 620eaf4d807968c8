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
   the fewest slices that fit (``cut``). Within a clique pods fill nodes by ``fill`` (any
   number of nodes) or ``span`` (exactly ``span`` nodes).

All or nothing: if any step fails, nothing is placed and the reason names the slice. A
domain's channel in a clique is the one it already has there (any of its slices), else the
clique's lowest free one. Decisions depend only on the view and the request (every order is
by explicit keys), so the same input always gives the same output.
"""

from __future__ import annotations

from collections.abc import Mapping

from services.clique_allocator.placement import messages
from services.clique_allocator.placement.cut import Shortfall, fewest_slices
from services.clique_allocator.placement.decision import (
    Decision,
    NotPlaced,
    Placed,
    Reason,
    SlicePlacement,
)
from services.clique_allocator.placement.fill import materialize, plan_fill
from services.clique_allocator.placement.layout import new_slice_sizes, request_problem
from services.clique_allocator.placement.model import GangRequest, NodeShare, Reservation
from services.clique_allocator.placement.score import Score, score_fill, score_nodes
from services.clique_allocator.placement.span import plan_span, span_room
from services.clique_allocator.placement.state import CliqueState
from services.clique_allocator.placement.view import ClusterView

SliceOutcome = tuple[Reservation, SlicePlacement]


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
    """Place the domain's pods beyond those it holds, or say why not (see module docstring)."""
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
            return _not_placed(
                request.domain,
                Reason.INVALID_REQUEST,
                f"domain {request.domain} holds no slice {move.slice_index} to move",
            )
        progress.drop(move.slice_index)
        outcome = _place_new(
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
        outcome = _grow(progress.view, current, wanted=wanted, span=request.span, excluded=excluded)
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
    outcome = _grow(progress.view, last, wanted=take, span=None, excluded=frozenset())
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
    if request.slice_pods is None and largest is not None and rest > largest[0]:
        return _cut_into_fewest(progress, rest)
    sizes = new_slice_sizes(rest, request.slice_pods)
    progress.slices += len(sizes)
    for pods in sizes:
        index = progress.next_index()
        outcome = _place_new(
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
        progress.add(_fill_into(state, request, slice_index=index, pods=state.capacity(gpus)))
    index = progress.next_index()
    # The last slice goes to another clique than the full ones, so the view before them serves.
    outcome = _place_new(
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


def _fill_into(
    state: CliqueState, request: GangRequest, *, slice_index: int, pods: int
) -> SliceOutcome:
    """A new slice of ``pods`` pods in ``state``, which has room for them."""
    steps = plan_fill(state, pods=pods, gpus_per_pod=request.gpus_per_pod)
    assert steps is not None
    channel = state.channel_for(request.domain)
    assert channel is not None
    placed = materialize(state, steps, hosting=frozenset())
    return _new_slice(state, request, slice_index=slice_index, channel=channel, placed=placed)


def _new_slice(
    state: CliqueState,
    request: GangRequest,
    *,
    slice_index: int,
    channel: int,
    placed: Mapping[int, int],
) -> SliceOutcome:
    """A new slice in ``state`` on ``channel`` with ``placed`` pods per node index."""
    base = Reservation(
        domain=request.domain,
        slice_index=slice_index,
        clique=state.id,
        channel=channel,
        gpus_per_pod=request.gpus_per_pod,
    )
    return _result(state, base=base, placed=placed)


def _short(
    view: ClusterView, *, request: GangRequest, pods: int, shortfall: Shortfall
) -> NotPlaced:
    gpus = request.gpus_per_pod
    empty = sum(state.size_capacity(gpus)[0] for state in view.cliques)
    if empty < pods:
        message = messages.larger_than_cluster(
            pods=pods, gpus_per_pod=gpus, room=empty, cliques=len(view.cliques)
        )
        return _not_placed(request.domain, Reason.LARGER_THAN_CLUSTER, message)
    message = messages.no_room_together(
        pods=pods, gpus_per_pod=gpus, room=shortfall.room, cliques=shortfall.cliques
    )
    return _not_placed(request.domain, Reason.INSUFFICIENT_CAPACITY, message)


def _place_new(
    view: ClusterView,
    *,
    request: GangRequest,
    slice_index: int,
    wanted: int,
    excluded: frozenset[str],
    skip: frozenset[str] = frozenset(),
) -> SliceOutcome | NotPlaced:
    """A new slice: the best-scoring clique with room and a channel (not one of ``skip``)."""
    gpus = request.gpus_per_pod
    span = request.span
    shapes = view.pod_shapes
    best: tuple[Score, CliqueState, dict[int, int] | None, int] | None = None
    most_room: tuple[int, int, str] | None = None
    if span is None:
        roomiest = view.most_room(gpus)
        most_room = None if roomiest is None else (roomiest[0], roomiest[0], roomiest[1])
        if most_room is None or most_room[0] < wanted:
            return _why_not(
                view,
                request=request,
                wanted=wanted,
                most_room=most_room,
                channel_blocked=False,
            )
    channel_blocked = False
    for state in view.cliques:
        if state.id in skip:
            continue
        placed_nodes: dict[int, int] | None = None
        if span is None:
            if state.capacity(gpus) < wanted:
                continue
            steps = plan_fill(state, pods=wanted, gpus_per_pod=gpus)
            if steps is None:
                continue
            score = score_fill(state, steps, shapes=shapes, gpus_per_pod=gpus, pods=wanted)
        else:
            offer = span_room(state, gpus_per_pod=gpus, existing={}, span=span, excluded=excluded)
            placed_nodes = plan_span(state, offer, pods=wanted, gpus_per_pod=gpus, existing={})
            if placed_nodes is None:
                nodes = min(len(offer.candidates), span)
                most_room = _more(most_room, (nodes, offer.pods, state.id))
                continue
            score = score_nodes(state, placed_nodes, shapes=shapes, gpus_per_pod=gpus)
        channel = state.channel_for(request.domain)
        if channel is None:
            channel_blocked = True
            continue
        if best is None or score < best[0]:
            best = (score, state, placed_nodes, channel)
    if best is None:
        return _why_not(
            view,
            request=request,
            wanted=wanted,
            most_room=most_room,
            channel_blocked=channel_blocked,
        )
    _, state, placed_nodes, channel = best
    if placed_nodes is None:
        return _fill_into(state, request, slice_index=slice_index, pods=wanted)
    return _new_slice(state, request, slice_index=slice_index, channel=channel, placed=placed_nodes)


def _grow(
    view: ClusterView,
    current: Reservation,
    *,
    wanted: int,
    span: int | None,
    excluded: frozenset[str],
) -> SliceOutcome | NotPlaced:
    """More pods for a slice that already has a clique: there, or nowhere."""
    gpus = current.gpus_per_pod
    state = view.clique(current.clique)
    if state is None:
        return _not_placed(
            current.domain,
            Reason.CLIQUE_UNAVAILABLE,
            f"the slice's clique {current.clique} is no longer in the cluster",
        )
    existing = {share.node: share.pods for share in current.shares}
    if span is None:
        steps = plan_fill(state, pods=wanted, gpus_per_pod=gpus)
        placed = None if steps is None else materialize(state, steps, hosting=frozenset(existing))
    else:
        if len(existing) > span:
            return _not_placed(
                current.domain,
                Reason.INVALID_REQUEST,
                f"the slice already spans {len(existing)} nodes in clique {current.clique}, "
                f"more than the {span} it asks for",
            )
        if wanted < span - len(existing):
            return _not_placed(
                current.domain,
                Reason.INVALID_REQUEST,
                f"{messages.pods_of(wanted, gpus)} more cannot take the slice from "
                f"{len(existing)} to {span} nodes",
            )
        offer = span_room(state, gpus_per_pod=gpus, existing=existing, span=span, excluded=excluded)
        placed = plan_span(state, offer, pods=wanted, gpus_per_pod=gpus, existing=existing)
    if placed is None:
        message = messages.clique_full(
            clique=state.id, pods=wanted, gpus_per_pod=gpus, room=state.capacity(gpus)
        )
        return _not_placed(current.domain, Reason.CLIQUE_FULL, message)
    return _result(state, base=current, placed=placed)


def _why_not(
    view: ClusterView,
    *,
    request: GangRequest,
    wanted: int,
    most_room: tuple[int, int, str] | None,
    channel_blocked: bool,
) -> NotPlaced:
    gpus = request.gpus_per_pod
    span = request.span
    largest = view.largest_clique(gpus)
    if largest is not None and (largest[0] < wanted or (span is not None and largest[1] < span)):
        message = messages.larger_than_any(
            pods=wanted, gpus_per_pod=gpus, span=span, largest=largest
        )
        return _not_placed(request.domain, Reason.LARGER_THAN_ANY_CLIQUE, message)
    if channel_blocked:
        return _not_placed(
            request.domain,
            Reason.NO_FREE_CHANNEL,
            "every clique with room has all of its IMEX channels in use",
        )
    if span is None:
        whole_nodes = gpus in view.node_sizes and len(view.node_sizes) == 1
        message = messages.no_room(
            pods=wanted,
            gpus_per_pod=gpus,
            whole_nodes=whole_nodes,
            best=None if most_room is None else (most_room[0], most_room[2]),
        )
    else:
        message = messages.no_room_on_span(
            pods=wanted, gpus_per_pod=gpus, span=span, best=most_room
        )
    return _not_placed(request.domain, Reason.INSUFFICIENT_CAPACITY, message)


def _result(state: CliqueState, *, base: Reservation, placed: Mapping[int, int]) -> SliceOutcome:
    """The slice's reservation with ``placed`` added, and where its new pods go."""
    position = {node.name: index for index, node in enumerate(state.nodes)}
    counts = {share.node: share.pods for share in base.shares}
    for index, pods in placed.items():
        name = state.nodes[index].name
        counts[name] = counts.get(name, 0) + pods
    # Shares in slot order; shares on nodes that left the clique after them, by name.
    ordered = sorted(counts, key=lambda name: (position.get(name, len(position)), name))
    reservation = Reservation(
        domain=base.domain,
        slice_index=base.slice_index,
        clique=base.clique,
        channel=base.channel,
        gpus_per_pod=base.gpus_per_pod,
        shares=tuple(NodeShare(node=name, pods=counts[name]) for name in ordered),
    )
    pod_nodes = tuple(
        state.nodes[index].name for index in sorted(placed) for _ in range(placed[index])
    )
    return reservation, SlicePlacement(
        slice_index=base.slice_index, clique=base.clique, channel=base.channel, pod_nodes=pod_nodes
    )


def _more(
    best: tuple[int, int, str] | None, candidate: tuple[int, int, str]
) -> tuple[int, int, str]:
    """The roomier of two (nodes or room, room, clique); the lower clique id on a tie."""
    if best is None or candidate[:2] > best[:2]:
        return candidate
    return best


def _not_placed(domain: str, reason: Reason, message: str) -> NotPlaced:
    return NotPlaced(domain=domain, reason=reason, message=message)
