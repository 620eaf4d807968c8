"""The placement policy on crafted clusters: which clique, which nodes, which channel."""

from __future__ import annotations

import pytest

from services.clique_allocator.placement import (
    ClusterView,
    GangRequest,
    NotPlaced,
    Placed,
    Reason,
    place,
)
from tests.unit.placement.clusters import (
    free_gpus,
    holding,
    placed,
    pods_per_node,
    rack,
    tray,
    whole_nodes,
)

SEED = GangRequest(domain="default/seed", new_pods=18, gpus_per_pod=4)
"""The seed workload: 18 pods of 4 GPUs, one NVL72 rack."""


def two_racks() -> ClusterView:
    return ClusterView.build(cliques=[rack("r0"), rack("r1")], reservations=[])


# --- the seed workload and whole racks --------------------------------------------------------


def test_the_seed_gang_lands_in_one_clique_one_pod_per_tray() -> None:
    placement, _ = placed(two_racks(), SEED)

    assert placement.cliques == ("r0",)
    assert placement.pod_nodes == tuple(tray("r0", slot) for slot in range(18))
    assert placement.slices[0].channel == 0


def test_two_seed_gangs_land_in_different_racks() -> None:
    first, view = placed(two_racks(), SEED)
    second, _ = placed(view, GangRequest(domain="default/seed-2", new_pods=18, gpus_per_pod=4))

    assert first.cliques == ("r0",)
    assert second.cliques == ("r1",)


def test_72_one_gpu_pods_fill_one_rack_four_per_node() -> None:
    placement, view = placed(
        two_racks(), GangRequest(domain="ml/wide", new_pods=72, gpus_per_pod=1)
    )

    assert placement.cliques == ("r0",)
    assert pods_per_node(placement) == {tray("r0", slot): 4 for slot in range(18)}
    assert set(free_gpus(view, "r0").values()) == {0}
    assert set(free_gpus(view, "r1").values()) == {4}


def test_two_36_pod_domains_asking_for_18_nodes_share_every_node_with_own_channels() -> None:
    first, view = placed(
        two_racks(), GangRequest(domain="ml/a", new_pods=36, gpus_per_pod=1, span=18)
    )
    second, view = placed(view, GangRequest(domain="ml/b", new_pods=36, gpus_per_pod=1, span=18))

    every_tray = {tray("r0", slot): 2 for slot in range(18)}
    assert pods_per_node(first) == every_tray
    assert pods_per_node(second) == every_tray
    assert (first.slices[0].channel, second.slices[0].channel) == (0, 1)
    assert set(free_gpus(view, "r0").values()) == {0}


def test_two_36_pod_domains_without_a_span_pack_one_rack_with_own_channels() -> None:
    first, view = placed(two_racks(), GangRequest(domain="ml/a", new_pods=36, gpus_per_pod=1))
    second, view = placed(view, GangRequest(domain="ml/b", new_pods=36, gpus_per_pod=1))

    assert first.cliques == second.cliques == ("r0",)
    assert pods_per_node(first) == {tray("r0", slot): 4 for slot in range(9)}
    assert pods_per_node(second) == {tray("r0", slot): 4 for slot in range(9, 18)}
    assert (first.slices[0].channel, second.slices[0].channel) == (0, 1)
    assert set(free_gpus(view, "r1").values()) == {4}


def test_domains_of_odd_sizes_share_the_node_where_one_ends() -> None:
    first, view = placed(two_racks(), GangRequest(domain="ml/a", new_pods=6, gpus_per_pod=1))
    second, _ = placed(view, GangRequest(domain="ml/b", new_pods=2, gpus_per_pod=1))

    assert pods_per_node(first) == {tray("r0", 0): 4, tray("r0", 1): 2}
    assert pods_per_node(second) == {tray("r0", 1): 2}
    assert second.slices[0].channel == 1


# --- fragmentation-aware best fit ------------------------------------------------------------


def test_the_tightest_clique_is_chosen() -> None:
    # Free whole nodes: r0 10, r1 6, r2 18. A 5-node gang fits all three; r1 fits tightest.
    view = ClusterView.build(
        cliques=[rack("r0"), rack("r1"), rack("r2")],
        reservations=[
            whole_nodes("busy/a", "r0", range(8)),
            whole_nodes("busy/b", "r1", range(12)),
        ],
    )

    placement, _ = placed(view, GangRequest(domain="ml/five", new_pods=5, gpus_per_pod=4))

    assert placement.cliques == ("r1",)
    assert placement.pod_nodes == tuple(tray("r1", slot) for slot in range(12, 17))


def test_a_small_gang_fills_a_used_rack_and_keeps_the_empty_rack_whole() -> None:
    view = ClusterView.build(
        cliques=[rack("r0"), rack("r1")], reservations=[whole_nodes("busy/a", "r1", range(3))]
    )

    placement, view = placed(view, GangRequest(domain="ml/one", new_pods=1, gpus_per_pod=4))

    assert placement.cliques == ("r1",)
    empty = view.clique("r0")
    assert empty is not None
    assert empty.whole_free_nodes() == 18


def test_sub_node_pods_fill_holes_rather_than_break_a_whole_node() -> None:
    # r0 is nearly full with no partly used node; r1 has a 2-GPU hole on tray 0 and 17
    # whole trays. Best fit by GPUs alone would pick r0; the hole in r1 breaks no whole node.
    view = ClusterView.build(
        cliques=[rack("r0"), rack("r1")],
        reservations=[
            whole_nodes("busy/a", "r0", range(17)),
            holding("busy/b", "r1", pods_by_slot={0: 2}, gpus_per_pod=1),
        ],
    )

    placement, view = placed(view, GangRequest(domain="ml/pair", new_pods=2, gpus_per_pod=1))

    assert pods_per_node(placement) == {tray("r1", 0): 2}
    assert free_gpus(view, "r0")[tray("r0", 17)] == 4


def test_within_a_clique_the_fullest_node_with_room_is_filled_first() -> None:
    view = ClusterView.build(
        cliques=[rack("r0", nodes=4)],
        reservations=[
            holding("busy/a", "r0", pods_by_slot={1: 1, 2: 3}, gpus_per_pod=1),
        ],
    )
    # Free GPUs per tray: 4, 3, 1, 4. Three 1-GPU pods: tray 2 (1 free), then tray 1 (3 free).
    placement, _ = placed(view, GangRequest(domain="ml/three", new_pods=3, gpus_per_pod=1))

    assert pods_per_node(placement) == {tray("r0", 2): 1, tray("r0", 1): 2}
    assert placement.pod_nodes == (tray("r0", 1), tray("r0", 1), tray("r0", 2))


def test_whole_node_pods_take_the_lowest_free_slots() -> None:
    view = ClusterView.build(
        cliques=[rack("r0", nodes=6)],
        reservations=[whole_nodes("busy/a", "r0", [0, 2])],
    )

    placement, _ = placed(view, GangRequest(domain="ml/three", new_pods=3, gpus_per_pod=4))

    assert placement.pod_nodes == (tray("r0", 1), tray("r0", 3), tray("r0", 4))


def test_two_gpu_pods_use_pairs_left_on_partly_used_nodes() -> None:
    view = ClusterView.build(
        cliques=[rack("r0", nodes=3)],
        reservations=[holding("busy/a", "r0", pods_by_slot={0: 2, 2: 2}, gpus_per_pod=1)],
    )

    placement, _ = placed(view, GangRequest(domain="ml/pairs", new_pods=2, gpus_per_pod=2))

    assert pods_per_node(placement) == {tray("r0", 0): 1, tray("r0", 2): 1}


# --- health ----------------------------------------------------------------------------------


def test_unhealthy_and_cordoned_nodes_are_never_used() -> None:
    view = ClusterView.build(
        cliques=[rack("r0", nodes=4, unhealthy=[0], cordoned=[2])], reservations=[]
    )

    placement, _ = placed(view, GangRequest(domain="ml/two", new_pods=2, gpus_per_pod=4))

    assert placement.pod_nodes == (tray("r0", 1), tray("r0", 3))


def test_a_rack_with_a_faulty_tray_cannot_take_the_seed_gang() -> None:
    view = ClusterView.build(
        cliques=[rack("r0", unhealthy=[5]), rack("r1", cordoned=[0])], reservations=[]
    )

    decision = place(view, SEED)

    assert decision == NotPlaced(
        domain="default/seed",
        reason=Reason.INSUFFICIENT_CAPACITY,
        message="no clique has 18 nodes with 4 free GPUs: best clique r0 has 17",
    )


# --- gangs that wait -------------------------------------------------------------------------


def test_a_gang_without_room_waits_with_the_best_clique_named() -> None:
    view = ClusterView.build(
        cliques=[rack("c0"), rack("c1")],
        reservations=[
            whole_nodes("busy/a", "c0", range(10)),
            whole_nodes("busy/b", "c1", range(6)),
        ],
    )

    decision = place(view, SEED)

    assert decision == NotPlaced(
        domain="default/seed",
        reason=Reason.INSUFFICIENT_CAPACITY,
        message="no clique has 18 nodes with 4 free GPUs: best clique c1 has 12",
    )


def test_sub_node_pods_without_room_say_how_many_pods_fit() -> None:
    view = ClusterView.build(
        cliques=[rack("c0", nodes=2)],
        reservations=[holding("busy/a", "c0", pods_by_slot={0: 3}, gpus_per_pod=1)],
    )

    decision = place(view, GangRequest(domain="ml/six", new_pods=6, gpus_per_pod=1))

    assert decision == NotPlaced(
        domain="ml/six",
        reason=Reason.INSUFFICIENT_CAPACITY,
        message="no clique has room for 6 pods of 1 GPU: best clique c0 has 5",
    )


def test_a_gang_larger_than_any_clique_is_cut_into_the_fewest_slices() -> None:
    placement, _ = placed(two_racks(), GangRequest(domain="ml/big", new_pods=19, gpus_per_pod=4))

    assert [(s.clique, len(s.pod_nodes)) for s in placement.slices] == [("r0", 18), ("r1", 1)]
    assert [s.channel for s in placement.slices] == [0, 0]


def test_a_fixed_slice_larger_than_any_clique_says_so() -> None:
    decision = place(
        two_racks(), GangRequest(domain="ml/big", new_pods=38, gpus_per_pod=4, slice_pods=19)
    )

    assert isinstance(decision, NotPlaced)
    assert decision.reason is Reason.LARGER_THAN_ANY_CLIQUE
    assert decision.message == (
        "slice 1 of 2: 19 pods of 4 GPUs exceed every clique even when empty: the largest, r0, "
        "takes 18 such pods on 18 nodes; use a smaller slice size"
    )


def test_a_cluster_with_no_cliques_makes_gangs_wait() -> None:
    decision = place(ClusterView.build(cliques=[], reservations=[]), SEED)

    assert isinstance(decision, NotPlaced)
    assert decision.reason is Reason.INSUFFICIENT_CAPACITY
    assert decision.message.endswith("the cluster has no usable GPU nodes")


# --- channels --------------------------------------------------------------------------------


def test_a_new_domain_gets_the_lowest_free_channel_of_its_clique() -> None:
    view = ClusterView.build(
        cliques=[rack("r0")],
        reservations=[
            whole_nodes("busy/a", "r0", [0], channel=0),
            whole_nodes("busy/b", "r0", [1], channel=2),
        ],
    )

    placement, _ = placed(view, GangRequest(domain="ml/new", new_pods=1, gpus_per_pod=4))

    assert placement.slices[0].channel == 1
    assert placement.reservations[0].channel == 1


def test_channels_are_per_clique() -> None:
    view = ClusterView.build(
        cliques=[rack("r0", nodes=1), rack("r1", nodes=1)],
        reservations=[whole_nodes("busy/a", "r0", [0], channel=0)],
    )

    placement, _ = placed(view, GangRequest(domain="ml/new", new_pods=1, gpus_per_pod=4))

    assert placement.cliques == ("r1",)
    assert placement.slices[0].channel == 0


def test_a_clique_with_every_channel_taken_takes_no_new_domain() -> None:
    many = [
        holding(f"tiny/{channel}", "r0", pods_by_slot={}, gpus_per_pod=1, channel=channel)
        for channel in range(2048)
    ]
    view = ClusterView.build(cliques=[rack("r0", nodes=2)], reservations=many)

    decision = place(view, GangRequest(domain="ml/new", new_pods=1, gpus_per_pod=1))

    assert isinstance(decision, NotPlaced)
    assert decision.reason is Reason.NO_FREE_CHANNEL


# --- slices ----------------------------------------------------------------------------------


def test_a_sliced_gang_puts_each_slice_in_one_clique() -> None:
    view = ClusterView.build(cliques=[rack("r0"), rack("r1"), rack("r2")], reservations=[])

    placement, view = placed(
        view, GangRequest(domain="ml/huge", new_pods=36, gpus_per_pod=4, slice_pods=18)
    )

    assert [placed_slice.clique for placed_slice in placement.slices] == ["r0", "r1"]
    for placed_slice in placement.slices:
        assert {node.split("-t")[0] for node in placed_slice.pod_nodes} == {placed_slice.clique}
        assert placed_slice.channel == 0
    assert [r.slice_index for r in placement.reservations] == [0, 1]


def test_small_slices_may_share_a_clique_and_then_share_its_channel() -> None:
    view = ClusterView.build(cliques=[rack("r0")], reservations=[])

    placement, _ = placed(
        view, GangRequest(domain="ml/sliced", new_pods=8, gpus_per_pod=1, slice_pods=4)
    )

    assert [s.clique for s in placement.slices] == ["r0", "r0"]
    assert [s.channel for s in placement.slices] == [0, 0]


def test_a_gang_is_placed_whole_or_not_at_all() -> None:
    # Room for two slices of 18 whole nodes, not three: nothing is reserved.
    view = ClusterView.build(cliques=[rack("r0"), rack("r1")], reservations=[])

    decision = place(
        view, GangRequest(domain="ml/huge", new_pods=54, gpus_per_pod=4, slice_pods=18)
    )

    assert isinstance(decision, NotPlaced)
    assert decision.reason is Reason.INSUFFICIENT_CAPACITY
    assert decision.message.startswith("slice 3 of 3: no clique has 18 nodes with 4 free GPUs")
    assert view.reservations == ()


def test_a_span_with_slices_is_shared_evenly_and_slices_never_share_a_node() -> None:
    view = ClusterView.build(cliques=[rack("r0")], reservations=[])

    placement, _ = placed(
        view, GangRequest(domain="ml/s", new_pods=8, gpus_per_pod=1, slice_pods=4, span=2)
    )

    first, second = (set(s.pod_nodes) for s in placement.slices)
    assert len(first) == len(second) == 2
    assert not first & second


def test_a_span_without_a_slice_size_is_never_cut_into_slices() -> None:
    # 9 pods on exactly 5 nodes: no clique has 5 nodes with room for 9 pods of 4 GPUs, and
    # cutting them (5 + 4) would give a slice that does not span 5 nodes.
    view = ClusterView.build(
        cliques=[rack("r0", nodes=2, gpus=8), rack("r1", nodes=5)], reservations=[]
    )

    decision = place(view, GangRequest(domain="ml/s", new_pods=9, gpus_per_pod=4, span=5))

    assert isinstance(decision, NotPlaced)
    assert decision.reason is Reason.LARGER_THAN_ANY_CLIQUE


# --- requests that can never be met ----------------------------------------------------------


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (
            GangRequest(domain="d", new_pods=2, gpus_per_pod=3),
            "pods of 3 GPUs fit no node: every node has 4 GPUs",
        ),
        (
            GangRequest(domain="d", new_pods=4, gpus_per_pod=1, span=5),
            "4 pods cannot span 5 nodes: every node needs a pod",
        ),
        (
            GangRequest(domain="d", new_pods=9, gpus_per_pod=1, span=2),
            "9 pods of 1 GPU do not fit on 2 nodes of 4 GPUs",
        ),
        (
            GangRequest(domain="d", new_pods=8, gpus_per_pod=1, slice_pods=4, span=5),
            "4 pods cannot span 5 nodes: every node needs a pod",
        ),
        (
            GangRequest(domain="d", new_pods=1, gpus_per_pod=0),
            "gpus_per_pod must be at least 1, not 0",
        ),
    ],
)
def test_requests_that_can_never_be_met_are_invalid(request_: GangRequest, message: str) -> None:
    decision = place(two_racks(), request_)

    assert decision == NotPlaced(domain="d", reason=Reason.INVALID_REQUEST, message=message)


def test_an_empty_gang_places_nothing() -> None:
    decision = place(two_racks(), GangRequest(domain="d", new_pods=0, gpus_per_pod=4))

    assert decision == Placed(domain="d")


def test_the_worked_example_of_the_placement_docs() -> None:
    view = ClusterView.build(
        cliques=[rack("a", nodes=4), rack("b", nodes=4), rack("c", nodes=4)],
        reservations=[
            holding("team/x", "b", pods_by_slot={0: 4}, gpus_per_pod=1, channel=0),
            holding("team/y", "b", pods_by_slot={1: 1}, gpus_per_pod=2, channel=1),
            holding("team/z", "c", pods_by_slot={0: 3, 1: 1}, gpus_per_pod=1, channel=0),
            whole_nodes("team/w", "c", [2, 3], channel=1),
        ],
    )

    train, view = placed(view, GangRequest(domain="ml/train", new_pods=3, gpus_per_pod=1))
    pairs, view = placed(view, GangRequest(domain="ml/pairs", new_pods=2, gpus_per_pod=2))
    whole, view = placed(view, GangRequest(domain="ml/rack", new_pods=4, gpus_per_pod=4))
    waiting = place(view, GangRequest(domain="ml/rack2", new_pods=4, gpus_per_pod=4))

    assert train.slices[0].pod_nodes == (tray("c", 0), tray("c", 1), tray("c", 1))
    assert train.slices[0].channel == 2
    assert pairs.slices[0].pod_nodes == (tray("b", 1), tray("b", 2))
    assert whole.slices[0].pod_nodes == tuple(tray("a", slot) for slot in range(4))
    assert waiting == NotPlaced(
        domain="ml/rack2",
        reason=Reason.INSUFFICIENT_CAPACITY,
        message="no clique has 4 nodes with 4 free GPUs: best clique b has 1",
    )
