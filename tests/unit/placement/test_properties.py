"""Properties of the engine over random clusters, reservations and requests."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from services.clique_allocator.placement import (
    MAX_CHANNELS,
    Clique,
    ClusterView,
    GangRequest,
    Node,
    NodeShare,
    NotPlaced,
    Placed,
    Reason,
    Reservation,
    SliceTarget,
    place,
)
from services.clique_allocator.placement.layout import new_slice_sizes

Cluster = tuple[list[Clique], list[Reservation]]


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    """A few cliques of 4- or 8-GPU nodes, some unusable, with reservations that fit."""
    cliques = []
    for index in range(draw(st.integers(1, 4))):
        gpus = draw(st.sampled_from([4, 4, 4, 8]))
        slots = draw(st.lists(st.integers(0, 20), min_size=1, max_size=8))
        cliques.append(
            Clique(
                id=f"uuid-{index}.{draw(st.integers(0, 2))}",
                nodes=tuple(
                    Node(
                        name=f"c{index}-n{position}",
                        slot=slot,
                        gpus=gpus,
                        healthy=draw(st.integers(0, 9)) > 0,
                        schedulable=draw(st.integers(0, 9)) > 0,
                    )
                    for position, slot in enumerate(slots)
                ),
            )
        )
    free = {node.name: node.gpus for clique in cliques for node in clique.nodes}
    used_channels: dict[str, set[int]] = {clique.id: set() for clique in cliques}
    reservations = []
    for index in range(draw(st.integers(0, 6))):
        gpus_per_pod = draw(st.sampled_from([1, 2, 4]))
        channels: dict[str, int] = {}
        for slice_index in range(draw(st.integers(1, 2))):
            clique = draw(st.sampled_from(cliques))
            if clique.id not in channels:
                taken = used_channels[clique.id]
                channels[clique.id] = draw(st.sampled_from(sorted(set(range(8)) - taken)))
                taken.add(channels[clique.id])
            channel = channels[clique.id]
            shares = []
            for node in clique.nodes:
                pods = draw(st.integers(0, free[node.name] // gpus_per_pod))
                if pods:
                    free[node.name] -= pods * gpus_per_pod
                    shares.append(NodeShare(node=node.name, pods=pods))
            reservations.append(
                Reservation(
                    domain=f"ns/d{index}",
                    slice_index=slice_index,
                    clique=clique.id,
                    channel=channel,
                    gpus_per_pod=gpus_per_pod,
                    shares=tuple(shares),
                )
            )
    return cliques, reservations


@st.composite
def requests(draw: st.DrawFn, cluster: Cluster) -> GangRequest:
    """Mostly requests that can be met somewhere, some that cannot, for new and held domains:
    growth of held slices, new pods in fixed or automatic slices, gangs larger than a clique."""
    cliques, reservations = cluster
    domains = sorted({r.domain for r in reservations})
    domain = draw(st.sampled_from([*domains, "ns/new", "ns/new"]))
    held = [r for r in reservations if r.domain == domain]
    if held and draw(st.integers(0, 9)) > 0:
        gpus_per_pod = held[0].gpus_per_pod
    else:
        gpus_per_pod = draw(st.sampled_from([1, 1, 2, 4, 4, 8]))
    targets = tuple(
        SliceTarget(slice_index=r.slice_index, pods=max(0, r.pods + draw(st.integers(-1, 3))))
        for r in held
        if draw(st.booleans())
    )
    capacity = sum(node.gpus for clique in cliques for node in clique.nodes) // gpus_per_pod
    new_pods = draw(st.one_of(st.integers(0, 12), st.integers(0, capacity + 2)))
    slice_pods = None
    if new_pods and draw(st.integers(0, 3)) == 0:
        slice_pods = draw(st.integers(1, new_pods))
    extend_last = bool(held) and slice_pods is None and draw(st.integers(0, 3)) == 0
    span = None
    if new_pods and not extend_last and draw(st.integers(0, 2)) == 0:
        per_slice = slice_pods or new_pods
        per_node = max(
            (node.gpus // gpus_per_pod for clique in cliques for node in clique.nodes), default=1
        )
        span = draw(st.integers(max(1, -(-per_slice // max(1, per_node))), per_slice))
    return GangRequest(
        domain=domain,
        gpus_per_pod=gpus_per_pod,
        targets=targets,
        new_pods=new_pods,
        slice_pods=slice_pods,
        extend_last=extend_last,
        span=span,
    )


@st.composite
def cases(draw: st.DrawFn) -> tuple[Cluster, GangRequest]:
    cluster = draw(clusters())
    return cluster, draw(requests(cluster))


def build(cluster: Cluster) -> ClusterView:
    cliques, reservations = cluster
    return ClusterView.build(cliques=cliques, reservations=reservations)


def reserved_gpus(cliques: list[Clique], reservations: tuple[Reservation, ...]) -> dict[str, int]:
    held = {node.name: 0 for clique in cliques for node in clique.nodes}
    for reservation in reservations:
        for share in reservation.shares:
            if share.node in held:
                held[share.node] += share.pods * reservation.gpus_per_pod
    return held


RUNS = settings(max_examples=200, deadline=None)


@RUNS
@given(cases())
def test_never_over_commits_a_node_nor_uses_an_unusable_one(
    case: tuple[Cluster, GangRequest],
) -> None:
    cluster, request = case
    cliques, _ = cluster
    view = build(cluster)
    decision = place(view, request)
    if not isinstance(decision, Placed):
        return
    after = view.with_domain(decision.domain, decision.reservations)
    nodes = {node.name: node for clique in cliques for node in clique.nodes}
    before = reserved_gpus(cliques, view.reservations)
    now = reserved_gpus(cliques, after.reservations)
    for name, node in nodes.items():
        if now[name] > before[name]:
            assert node.usable
            assert now[name] <= node.gpus


@RUNS
@given(cases())
def test_no_slice_spans_two_cliques(case: tuple[Cluster, GangRequest]) -> None:
    cluster, request = case
    view = build(cluster)
    decision = place(view, request)
    if not isinstance(decision, Placed):
        return
    for placed in decision.slices:
        assert {view.clique_of(node) for node in placed.pod_nodes} <= {placed.clique}
    grown = {placed.slice_index for placed in decision.slices}
    for reservation in decision.reservations:
        if reservation.slice_index in grown:
            nodes = {share.node for share in reservation.shares}
            assert {view.clique_of(node) for node in nodes} <= {reservation.clique, None}


def _new(request: GangRequest) -> GangRequest:
    """The request's new pods as a new domain's gang, automatically sliced."""
    return GangRequest(
        domain="ns/new", new_pods=request.new_pods, gpus_per_pod=request.gpus_per_pod
    )


@RUNS
@given(cases())
def test_a_new_gang_that_fits_a_clique_gets_one_slice(case: tuple[Cluster, GangRequest]) -> None:
    cluster, request = case
    request = _new(request)
    view = build(cluster)
    decision = place(view, request)
    largest = view.largest_clique(request.gpus_per_pod)
    if isinstance(decision, Placed) and largest is not None and request.new_pods <= largest[0]:
        assert len(decision.slices) <= 1


@RUNS
@given(cases())
def test_channels_stay_unique_per_clique_and_in_range(case: tuple[Cluster, GangRequest]) -> None:
    cluster, request = case
    view = build(cluster)
    decision = place(view, request)
    if not isinstance(decision, Placed):
        return
    after = view.with_domain(decision.domain, decision.reservations)
    owners: dict[tuple[str, int], str] = {}
    channel_of: dict[tuple[str, str], int] = {}
    for reservation in after.reservations:
        assert 0 <= reservation.channel < MAX_CHANNELS
        key = (reservation.clique, reservation.channel)
        assert owners.setdefault(key, reservation.domain) == reservation.domain
        domain_key = (reservation.clique, reservation.domain)
        assert channel_of.setdefault(domain_key, reservation.channel) == reservation.channel


@RUNS
@given(cases(), st.randoms(use_true_random=False))
def test_the_same_input_in_any_order_gives_the_same_decision(
    case: tuple[Cluster, GangRequest], shuffler: random.Random
) -> None:
    (cliques, reservations), request = case
    shuffled_cliques = [
        Clique(id=clique.id, nodes=tuple(shuffler.sample(clique.nodes, len(clique.nodes))))
        for clique in shuffler.sample(cliques, len(cliques))
    ]
    shuffled_reservations = shuffler.sample(reservations, len(reservations))

    one = place(build((cliques, reservations)), request)
    other = place(build((shuffled_cliques, shuffled_reservations)), request)

    assert one == other


@RUNS
@given(cases())
def test_growth_never_moves_a_slice_nor_takes_pods_away(case: tuple[Cluster, GangRequest]) -> None:
    cluster, request = case
    view = build(cluster)
    decision = place(view, request)
    if not isinstance(decision, Placed):
        return
    after = {r.slice_index: r for r in decision.reservations}
    for old in view.reservations_of(request.domain):
        new = after[old.slice_index]
        assert (new.clique, new.channel, new.gpus_per_pod) == (
            old.clique,
            old.channel,
            old.gpus_per_pod,
        )
        new_pods = {share.node: share.pods for share in new.shares}
        assert all(new_pods.get(share.node, 0) >= share.pods for share in old.shares)


@RUNS
@given(cases())
def test_all_or_nothing_every_slice_gets_exactly_what_was_asked(
    case: tuple[Cluster, GangRequest],
) -> None:
    cluster, request = case
    view = build(cluster)
    decision = place(view, request)
    if not isinstance(decision, Placed):
        return
    old = {r.slice_index: r for r in view.reservations_of(request.domain)}
    now = {r.slice_index: r.pods for r in decision.reservations}
    targets = {t.slice_index: t.pods for t in request.targets}
    last = max(old, default=None)
    extended = 0
    for index, reservation in old.items():
        wanted = max(reservation.pods, targets.get(index, 0))
        if request.extend_last and index == last:
            extended = now[index] - wanted
            assert extended >= 0
        else:
            assert now[index] == wanted
    new_sizes = [pods for index, pods in sorted(now.items()) if index not in old]
    assert extended + sum(new_sizes) == request.new_pods
    if request.slice_pods is not None:
        assert tuple(new_sizes) == new_slice_sizes(request.new_pods, request.slice_pods)
    if request.span is not None:
        grown = {placed.slice_index for placed in decision.slices}
        spans = [
            {s.node for s in r.shares} for r in decision.reservations if r.slice_index in grown
        ]
        assert all(len(nodes) == request.span for nodes in spans)
        assert len(set().union(*spans)) == sum(len(nodes) for nodes in spans)


def _room(cluster: Cluster, gpus_per_pod: int) -> dict[str, int]:
    cliques, reservations = cluster
    held = reserved_gpus(cliques, tuple(reservations))
    return {
        clique.id: sum(
            max(0, node.gpus - held[node.name]) // gpus_per_pod
            for node in clique.nodes
            if node.usable and node.gpus % gpus_per_pod == 0
        )
        for clique in cliques
    }


@RUNS
@given(cases())
def test_a_new_gang_waits_only_when_the_cliques_lack_room(
    case: tuple[Cluster, GangRequest],
) -> None:
    cluster, request = case
    cliques, _ = cluster
    request = _new(request)
    if not any(node.gpus % request.gpus_per_pod == 0 for c in cliques for node in c.nodes):
        return
    view = build(cluster)
    decision = place(view, request)
    room = _room(cluster, request.gpus_per_pod)
    largest = view.largest_clique(request.gpus_per_pod)
    assert largest is not None
    if request.new_pods <= largest[0]:
        fits = [clique_id for clique_id, pods in room.items() if pods >= request.new_pods]
        assert isinstance(decision, Placed) == bool(fits)
        if isinstance(decision, Placed) and decision.slices:
            assert decision.slices[0].clique in fits
        if isinstance(decision, NotPlaced) and decision.reason is Reason.INSUFFICIENT_CAPACITY:
            assert f"has {max(room.values())}" in decision.message
    else:
        assert isinstance(decision, Placed) == (sum(room.values()) >= request.new_pods)


@RUNS
@given(cases())
def test_a_gang_larger_than_any_clique_takes_the_fewest_slices(
    case: tuple[Cluster, GangRequest],
) -> None:
    cluster, request = case
    request = _new(request)
    view = build(cluster)
    decision = place(view, request)
    largest = view.largest_clique(request.gpus_per_pod)
    if not isinstance(decision, Placed) or largest is None or request.new_pods <= largest[0]:
        return
    covered, fewest = 0, 0
    for pods in sorted(_room(cluster, request.gpus_per_pod).values(), reverse=True):
        if covered >= request.new_pods:
            break
        covered += pods
        fewest += 1
    assert len(decision.slices) == fewest
    assert len({placed.clique for placed in decision.slices}) == fewest


@RUNS
@given(cases())
def test_advancing_the_view_equals_rebuilding_it(case: tuple[Cluster, GangRequest]) -> None:
    cluster, request = case
    cliques, reservations = cluster
    view = build(cluster)
    decision = place(view, request)
    if not isinstance(decision, Placed):
        return

    advanced = view.with_domain(decision.domain, decision.reservations)
    others = [r for r in reservations if r.domain != decision.domain]
    rebuilt = ClusterView.build(cliques=cliques, reservations=[*others, *decision.reservations])

    assert advanced.cliques == rebuilt.cliques
    assert advanced.reservations == rebuilt.reservations
