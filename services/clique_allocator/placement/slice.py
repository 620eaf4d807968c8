"""One slice in one clique: a new slice in the best-scoring clique with room, more pods for a
slice in its own clique, and why neither could be done.

The engine (``engine.py``) decides which slices a domain needs; these functions decide where in
a clique each goes. Within a clique pods fill nodes by ``fill`` (any number of nodes) or
``span`` (exactly ``span`` nodes); cliques are compared by ``score``. Every order is by explicit
keys, so the same view and request always give the same slice.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from services.clique_allocator.placement import messages
from services.clique_allocator.placement.decision import NotPlaced, Reason, SlicePlacement
from services.clique_allocator.placement.fill import materialize, plan_fill
from services.clique_allocator.placement.model import GangRequest, NodeShare, Reservation
from services.clique_allocator.placement.score import Score, score_fill, score_nodes
from services.clique_allocator.placement.span import plan_span, span_room
from services.clique_allocator.placement.state import CliqueState
from services.clique_allocator.placement.view import ClusterView

SliceOutcome = tuple[Reservation, SlicePlacement]
"""A slice's reservation (what it holds now) and where its new pods go."""


def fill_into(
    state: CliqueState, request: GangRequest, *, slice_index: int, pods: int
) -> SliceOutcome:
    """A new slice of ``pods`` pods in ``state``, which has room for them."""
    steps = plan_fill(state, pods=pods, gpus_per_pod=request.gpus_per_pod)
    assert steps is not None
    channel = state.channel_for(request.domain)
    assert channel is not None
    placed = materialize(state, steps, hosting=frozenset())
    return new_slice(state, request, slice_index=slice_index, channel=channel, placed=placed)


def new_slice(
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


class _Best(msgspec.Struct, kw_only=True):
    """The search for a new slice's clique so far."""

    best: tuple[Score, CliqueState, dict[int, int] | None, int] | None = None
    """Score, clique, pods per node index (None: fill) and channel of the best clique yet."""
    most_room: tuple[int, int, str] | None = None
    """(nodes or room, room, clique) of the roomiest clique, for the message if none fits."""
    channel_blocked: bool = False
    """A clique had room but no free channel."""


def place_new(
    view: ClusterView,
    *,
    request: GangRequest,
    slice_index: int,
    wanted: int,
    excluded: frozenset[str],
    skip: frozenset[str] = frozenset(),
) -> SliceOutcome | NotPlaced:
    """A new slice: the best-scoring clique with room and a channel (not one of ``skip``)."""
    search = _Best()
    if request.span is None:
        roomiest = view.most_room(request.gpus_per_pod)
        search.most_room = None if roomiest is None else (roomiest[0], roomiest[0], roomiest[1])
        if search.most_room is None or search.most_room[0] < wanted:
            return _why_not(
                view, request=request, wanted=wanted, most_room=search.most_room,
                channel_blocked=False,
            )  # fmt: skip
    for state in view.cliques:
        if state.id not in skip:
            _consider(state, view, request=request, wanted=wanted, excluded=excluded, into=search)
    if search.best is None:
        return _why_not(
            view, request=request, wanted=wanted, most_room=search.most_room,
            channel_blocked=search.channel_blocked,
        )  # fmt: skip
    _, state, placed_nodes, channel = search.best
    if placed_nodes is None:
        return fill_into(state, request, slice_index=slice_index, pods=wanted)
    return new_slice(state, request, slice_index=slice_index, channel=channel, placed=placed_nodes)


def _consider(
    state: CliqueState,
    view: ClusterView,
    *,
    request: GangRequest,
    wanted: int,
    excluded: frozenset[str],
    into: _Best,
) -> None:
    """Score ``state`` for a new slice of ``wanted`` pods; keep it in ``into`` if it is best."""
    gpus = request.gpus_per_pod
    span = request.span
    shapes = view.pod_shapes
    placed_nodes: dict[int, int] | None = None
    if span is None:
        if state.capacity(gpus) < wanted:
            return
        steps = plan_fill(state, pods=wanted, gpus_per_pod=gpus)
        if steps is None:
            return
        score = score_fill(state, steps, shapes=shapes, gpus_per_pod=gpus, pods=wanted)
    else:
        offer = span_room(state, gpus_per_pod=gpus, existing={}, span=span, excluded=excluded)
        placed_nodes = plan_span(state, offer, pods=wanted, gpus_per_pod=gpus, existing={})
        if placed_nodes is None:
            nodes = min(len(offer.candidates), span)
            into.most_room = _more(into.most_room, (nodes, offer.pods, state.id))
            return
        score = score_nodes(state, placed_nodes, shapes=shapes, gpus_per_pod=gpus)
    channel = state.channel_for(request.domain)
    if channel is None:
        into.channel_blocked = True
        return
    if into.best is None or score < into.best[0]:
        into.best = (score, state, placed_nodes, channel)


def grow(
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
        return not_placed(
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
            return not_placed(
                current.domain,
                Reason.INVALID_REQUEST,
                f"the slice already spans {len(existing)} nodes in clique {current.clique}, "
                f"more than the {span} it asks for",
            )
        if wanted < span - len(existing):
            return not_placed(
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
        return not_placed(current.domain, Reason.CLIQUE_FULL, message)
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
        return not_placed(request.domain, Reason.LARGER_THAN_ANY_CLIQUE, message)
    if channel_blocked:
        return not_placed(
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
    return not_placed(request.domain, Reason.INSUFFICIENT_CAPACITY, message)


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


def not_placed(domain: str, reason: Reason, message: str) -> NotPlaced:
    return NotPlaced(domain=domain, reason=reason, message=message)
