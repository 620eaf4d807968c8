"""The engine under a gang's node limits: excluded nodes, per-node caps, preferences, reasons."""

from __future__ import annotations

from services.clique_allocator.placement import (
    ClusterView,
    GangRequest,
    NodeLimits,
    NotPlaced,
    Placed,
    Reason,
    place,
)
from tests.unit.placement.clusters import rack, tray

WHY = "4 nodes of clique r0 lack the toleration for t=v:NoSchedule"


def view(*racks: str, nodes: int = 4) -> ClusterView:
    return ClusterView.build(cliques=[rack(r, nodes=nodes) for r in racks], reservations=[])


def test_excluded_nodes_take_no_pod_even_where_they_would_score_best() -> None:
    limits = NodeLimits(excluded=frozenset({tray("r0", 0), tray("r0", 1)}), why="x")
    decision = place(view("r0"), GangRequest(domain="d", gpus_per_pod=4, new_pods=2, limits=limits))
    assert isinstance(decision, Placed)
    assert decision.pod_nodes == (tray("r0", 2), tray("r0", 3))


def test_a_cap_spreads_pods_the_gpus_would_pack() -> None:
    limits = NodeLimits(most_pods={tray("r0", s): 1 for s in range(4)}, why="y")
    decision = place(view("r0"), GangRequest(domain="d", gpus_per_pod=1, new_pods=3, limits=limits))
    assert isinstance(decision, Placed)
    assert sorted(decision.pod_nodes) == [tray("r0", 0), tray("r0", 1), tray("r0", 2)]


def test_a_gang_only_the_limits_keep_out_waits_with_their_reason() -> None:
    limits = NodeLimits(excluded=frozenset(tray("r0", s) for s in range(4)), why=WHY)
    decision = place(view("r0"), GangRequest(domain="d", gpus_per_pod=4, new_pods=1, limits=limits))
    assert isinstance(decision, NotPlaced)
    assert decision.reason is Reason.POD_CONSTRAINTS
    assert decision.message.startswith(WHY + "; on the nodes left, ")


def test_a_gang_too_big_anyway_keeps_its_reason_and_mentions_the_limits() -> None:
    limits = NodeLimits(excluded=frozenset({tray("r0", 0)}), why=WHY)
    request = GangRequest(domain="d", gpus_per_pod=4, new_pods=5, slice_pods=5, limits=limits)
    decision = place(view("r0"), request)
    assert isinstance(decision, NotPlaced)
    assert decision.reason is Reason.LARGER_THAN_ANY_CLIQUE
    assert decision.message.endswith(f"(besides, {WHY})")


def test_limits_shrink_the_largest_clique_so_a_gang_is_cut_into_slices() -> None:
    # Two racks of 4 trays; the pods fit only 2 trays of each: 4 pods need two slices.
    excluded = frozenset(tray(r, s) for r in ("r0", "r1") for s in (2, 3))
    limits = NodeLimits(excluded=excluded, why="z")
    cluster = view("r0", "r1")
    restricted = cluster.restricted("d", limits, gpus_per_pod=4)
    assert restricted.largest_clique(4) == (2, 2, "r0")
    assert cluster.largest_clique(4) == (4, 4, "r0")
    decision = place(cluster, GangRequest(domain="d", gpus_per_pod=4, new_pods=4, limits=limits))
    assert isinstance(decision, Placed)
    assert len(decision.slices) == 2
    assert not set(decision.pod_nodes) & excluded


def test_preferred_nodes_win_a_tie() -> None:
    limits = NodeLimits(preferred={tray("r0", 3): 10})
    decision = place(view("r0"), GangRequest(domain="d", gpus_per_pod=4, new_pods=1, limits=limits))
    assert isinstance(decision, Placed)
    assert decision.pod_nodes == (tray("r0", 3),)


def test_a_cap_counts_the_domains_pods_already_on_the_node() -> None:
    cluster = view("r0", nodes=1)
    first = place(cluster, GangRequest(domain="d", gpus_per_pod=1, new_pods=1))
    assert isinstance(first, Placed)
    cluster = cluster.with_domain("d", first.reservations)
    limits = NodeLimits(most_pods={tray("r0", 0): 2}, why="2 at most")
    grown = place(
        cluster,
        GangRequest(domain="d", gpus_per_pod=1, targets=(), new_pods=1, extend_last=True,
                    limits=limits),
    )  # fmt: skip
    assert isinstance(grown, Placed) and grown.reservations[0].pods == 2
    full = place(
        cluster.with_domain("d", grown.reservations),
        GangRequest(domain="d", gpus_per_pod=1, new_pods=1, extend_last=True, limits=limits),
    )
    assert isinstance(full, NotPlaced) and full.reason is Reason.POD_CONSTRAINTS
