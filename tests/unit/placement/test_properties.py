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
    Placement,
    Reason,
    Reservation,
    place,
)

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
    """Mostly requests that can be met somewhere, some that cannot, for new and held domains."""
    cliques, reservations = cluster
    domains = sorted({r.domain for r in reservations})
    domain = draw(st.sampled_from([*domains, "ns/new", "ns/new"]))
    held = [r for r in reservations if r.domain == domain]
    if held and draw(st.integers(0, 9)) > 0:
        gpus_per_pod = held[0].gpus_per_pod
    else:
        gpus_per_pod = draw(st.sampled_from([1, 1, 2, 4, 4, 8]))
    pods = draw(st.integers(0, 3)) + sum(r.pods for r in held) + draw(st.integers(0, 12))
    slice_pods = None
    if pods and draw(st.integers(0, 3)) == 0:
        slice_pods = draw(st.sampled_from([d for d in range(1, pods + 1) if pods % d == 0]))
    num_nodes = None
    if pods and draw(st.integers(0, 2)) == 0:
        per_slice = slice_pods or pods
        per_node = max(
            (node.gpus // gpus_per_pod for clique in cliques for node in clique.nodes), default=1
        )
        span = draw(st.integers(max(1, -(-per_slice // max(1, per_node))), per_slice))
        num_nodes = span * (pods // per_slice) + draw(st.sampled_from([0, 0, 0, 0, 1]))
    return GangRequest(
        domain=domain,
        pods=pods,
        gpus_per_pod=gpus_per_pod,
        slice_pods=slice_pods,
        num_nodes=num_nodes,
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
    if not isinstance(decision, Placement):
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
def test_never_splits_a_gang_or_a_slice_across_cliques(case: tuple[Cluster, GangRequest]) -> None:
    cluster, request = case
    view = build(cluster)
    decision = place(view, request)
    if not isinstance(decision, Placement):
        return
    for placed in decision.slices:
        assert {view.clique_of(node) for node in placed.pod_nodes} <= {placed.clique}
    if request.slice_pods in (None, request.pods):
        assert len({placed.clique for placed in decision.slices}) <= 1


@RUNS
@given(cases())
def test_channels_stay_unique_per_clique_and_in_range(case: tuple[Cluster, GangRequest]) -> None:
    cluster, request = case
    view = build(cluster)
    decision = place(view, request)
    if not isinstance(decision, Placement):
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
    if not isinstance(decision, Placement):
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
def test_a_placement_gives_every_slice_exactly_its_size(case: tuple[Cluster, GangRequest]) -> None:
    cluster, request = case
    view = build(cluster)
    decision = place(view, request)
    if not isinstance(decision, Placement):
        return
    slice_pods = request.slice_pods or request.pods
    slices = request.pods // slice_pods if request.pods else 0
    old = {r.slice_index: r.pods for r in view.reservations_of(request.domain)}
    added = {placed.slice_index: len(placed.pod_nodes) for placed in decision.slices}
    for reservation in decision.reservations:
        index = reservation.slice_index
        if index < slices:
            assert reservation.pods == max(old.get(index, 0), slice_pods)
        assert reservation.pods == old.get(index, 0) + added.get(index, 0)
    if request.num_nodes is not None and slices:
        span = request.num_nodes // slices
        spans = [
            {share.node for share in r.shares}
            for r in decision.reservations
            if r.slice_index in added
        ]
        assert all(len(nodes) == span for nodes in spans)
        assert len(set().union(*spans)) == sum(len(nodes) for nodes in spans)


@RUNS
@given(cases())
def test_a_new_gang_waits_only_when_no_clique_has_room(case: tuple[Cluster, GangRequest]) -> None:
    cluster, request = case
    cliques, reservations = cluster
    request = GangRequest(domain="ns/new", pods=request.pods, gpus_per_pod=request.gpus_per_pod)
    view = build(cluster)
    decision = place(view, request)
    held = reserved_gpus(cliques, tuple(reservations))
    room = {
        clique.id: sum(
            max(0, node.gpus - held[node.name]) // request.gpus_per_pod
            for node in clique.nodes
            if node.usable and node.gpus % request.gpus_per_pod == 0
        )
        for clique in cliques
    }
    fits = [clique_id for clique_id, pods in room.items() if pods >= request.pods]
    if any(node.gpus % request.gpus_per_pod == 0 for c in cliques for node in c.nodes):
        assert isinstance(decision, Placement) == bool(fits)
    if isinstance(decision, Placement) and decision.slices:
        assert decision.slices[0].clique in fits
    if isinstance(decision, NotPlaced) and decision.reason is Reason.INSUFFICIENT_CAPACITY:
        assert f"has {max(room.values())}" in decision.message


@RUNS
@given(cases())
def test_advancing_the_view_equals_rebuilding_it(case: tuple[Cluster, GangRequest]) -> None:
    cluster, request = case
    cliques, reservations = cluster
    view = build(cluster)
    decision = place(view, request)
    if not isinstance(decision, Placement):
        return

    advanced = view.with_domain(decision.domain, decision.reservations)
    others = [r for r in reservations if r.domain != decision.domain]
    rebuilt = ClusterView.build(cliques=cliques, reservations=[*others, *decision.reservations])

    assert advanced.cliques == rebuilt.cliques
    assert advanced.reservations == rebuilt.reservations
