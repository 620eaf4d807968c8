"""The placement decision: where a domain's new pods go, and on which IMEX channel.

``place(view, request)`` places what the domain asks for beyond what it already holds:

- a domain new to the cluster: each slice (the whole gang when unsliced) goes to the clique
  that scores best (``score``); within it, pods fill nodes by ``fill`` (any number of nodes)
  or ``span`` (exactly ``num_nodes``);
- a domain that already holds a slice: the slice grows in its own clique or not at all
  (``CliqueFull``); a domain never moves cliques;
- all or nothing: if one slice cannot be placed, nothing is, and the reason names the slice.

The channel is the domain's existing channel in the clique, else the clique's lowest free one.
Decisions depend only on the view and the request (every order is by explicit keys), so the
same input always gives the same output.
"""

from __future__ import annotations

from collections.abc import Mapping

from services.clique_allocator.placement import messages
from services.clique_allocator.placement.decision import (
    Decision,
    NotPlaced,
    Placement,
    Reason,
    SlicePlacement,
)
from services.clique_allocator.placement.fill import materialize, plan_fill
from services.clique_allocator.placement.layout import SliceLayout, plan_layout
from services.clique_allocator.placement.model import GangRequest, NodeShare, Reservation
from services.clique_allocator.placement.score import Score, score_fill, score_nodes
from services.clique_allocator.placement.span import plan_span, span_room
from services.clique_allocator.placement.state import CliqueState
from services.clique_allocator.placement.view import ClusterView

Placed = tuple[Reservation, SlicePlacement]


def place(view: ClusterView, request: GangRequest) -> Decision:
    """Place the domain's pods beyond those it holds, or say why not (see module docstring)."""
    held = view.reservations_of(request.domain)
    layout = plan_layout(request, node_sizes=view.node_sizes, held=held)
    if isinstance(layout, str):
        return NotPlaced(domain=request.domain, reason=Reason.INVALID_REQUEST, message=layout)
    by_slice = {reservation.slice_index: reservation for reservation in held}
    working = view
    placed: list[SlicePlacement] = []
    for slice_index in range(layout.slices):
        current = by_slice.get(slice_index)
        wanted = layout.pods - (current.pods if current else 0)
        if wanted <= 0:
            continue
        outcome = _place_slice(
            working,
            request=request,
            layout=layout,
            slice_index=slice_index,
            current=current,
            wanted=wanted,
            excluded=_other_slices_nodes(by_slice, slice_index) if layout.span else frozenset(),
        )
        if isinstance(outcome, NotPlaced):
            message = messages.in_slice(
                outcome.message, slice_index=slice_index, slices=layout.slices
            )
            return NotPlaced(domain=request.domain, reason=outcome.reason, message=message)
        by_slice[slice_index], slice_placement = outcome
        placed.append(slice_placement)
        if slice_index + 1 < layout.slices:
            working = working.with_domain(request.domain, by_slice.values())
    return Placement(
        domain=request.domain,
        slices=tuple(placed),
        reservations=tuple(by_slice[index] for index in sorted(by_slice)),
    )


def _place_slice(
    view: ClusterView,
    *,
    request: GangRequest,
    layout: SliceLayout,
    slice_index: int,
    current: Reservation | None,
    wanted: int,
    excluded: frozenset[str],
) -> Placed | NotPlaced:
    if current is not None:
        return _grow(view, current, wanted=wanted, span=layout.span, excluded=excluded)
    return _place_new(
        view,
        request=request,
        slice_index=slice_index,
        wanted=wanted,
        span=layout.span,
        excluded=excluded,
    )


def _place_new(
    view: ClusterView,
    *,
    request: GangRequest,
    slice_index: int,
    wanted: int,
    span: int | None,
    excluded: frozenset[str],
) -> Placed | NotPlaced:
    """A new slice: the best-scoring clique with room and a channel."""
    gpus = request.gpus_per_pod
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
                span=span,
                most_room=most_room,
                channel_blocked=False,
            )
    channel_blocked = False
    for state in view.cliques:
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
            span=span,
            most_room=most_room,
            channel_blocked=channel_blocked,
        )
    _, state, placed_nodes, channel = best
    if placed_nodes is None:
        steps = plan_fill(state, pods=wanted, gpus_per_pod=gpus)
        assert steps is not None  # the clique was scored on this very plan
        placed_nodes = materialize(state, steps, hosting=frozenset())
    return _result(
        state,
        base=Reservation(
            domain=request.domain,
            slice_index=slice_index,
            clique=state.id,
            channel=channel,
            gpus_per_pod=gpus,
        ),
        placed=placed_nodes,
    )


def _grow(
    view: ClusterView,
    current: Reservation,
    *,
    wanted: int,
    span: int | None,
    excluded: frozenset[str],
) -> Placed | NotPlaced:
    """More pods for a slice that already has a clique: there, or nowhere."""
    gpus = current.gpus_per_pod
    state = view.clique(current.clique)
    if state is None:
        return _not_placed(
            current.domain,
            Reason.CLIQUE_UNAVAILABLE,
            f"the domain's clique {current.clique} is no longer in the cluster",
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
                f"the domain already spans {len(existing)} nodes in clique {current.clique}, "
                f"more than the {span} it asks for",
            )
        if wanted < span - len(existing):
            return _not_placed(
                current.domain,
                Reason.INVALID_REQUEST,
                f"{messages.pods_of(wanted, gpus)} more cannot take the domain from "
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
    span: int | None,
    most_room: tuple[int, int, str] | None,
    channel_blocked: bool,
) -> NotPlaced:
    gpus = request.gpus_per_pod
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


def _result(state: CliqueState, *, base: Reservation, placed: Mapping[int, int]) -> Placed:
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


def _other_slices_nodes(by_slice: Mapping[int, Reservation], slice_index: int) -> frozenset[str]:
    """Nodes of the domain's other slices: with a span, slices never share a node."""
    return frozenset(
        share.node
        for index, reservation in by_slice.items()
        if index != slice_index
        for share in reservation.shares
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
