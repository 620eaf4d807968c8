"""Elastic domains: growth stays in the domain's clique, shrinking releases shares."""

from __future__ import annotations

import pytest

from services.clique_allocator.placement import (
    ClusterView,
    GangRequest,
    NodeShare,
    NotPlaced,
    Placed,
    Reason,
    SliceTarget,
    place,
    release,
)
from tests.unit.placement.clusters import (
    free_gpus,
    grow_to,
    holding,
    placed,
    pods_per_node,
    rack,
    tray,
    whole_nodes,
)


def test_a_grown_domain_gets_its_new_pods_in_its_clique_on_its_channel() -> None:
    # The domain lives in r1 on channel 3, though empty r0 would score as well.
    view = ClusterView.build(
        cliques=[rack("r0"), rack("r1")],
        reservations=[whole_nodes("ml/a", "r1", [0, 1], channel=3)],
    )

    placement, view = placed(view, grow_to("ml/a", 4, gpus_per_pod=4))

    assert placement.slices[0].clique == "r1"
    assert placement.slices[0].channel == 3
    assert placement.slices[0].pod_nodes == (tray("r1", 2), tray("r1", 3))
    assert placement.reservations[0].shares == tuple(
        NodeShare(node=tray("r1", slot), pods=1) for slot in range(4)
    )


def test_growth_fills_the_domains_own_nodes_first() -> None:
    view = ClusterView.build(
        cliques=[rack("r0", nodes=3)],
        reservations=[
            holding("ml/a", "r0", pods_by_slot={2: 1}, gpus_per_pod=1),
            holding("busy/b", "r0", pods_by_slot={0: 1}, gpus_per_pod=1, channel=1),
        ],
    )
    # Trays 0 and 2 both have 3 free; the domain already runs on tray 2.
    placement, _ = placed(view, grow_to("ml/a", 3, gpus_per_pod=1))

    assert pods_per_node(placement) == {tray("r0", 2): 2}


def test_a_domain_whose_clique_is_full_waits_rather_than_moves() -> None:
    view = ClusterView.build(
        cliques=[rack("r0", nodes=2), rack("r1")],
        reservations=[whole_nodes("ml/a", "r0", [0, 1])],
    )

    decision = place(view, grow_to("ml/a", 3, gpus_per_pod=4))

    assert decision == NotPlaced(
        domain="ml/a",
        reason=Reason.CLIQUE_FULL,
        message="the slice stays in clique r0, which has room for 0 of 1 pod of 4 GPUs more",
    )


def test_asking_again_for_what_the_domain_holds_places_nothing_new() -> None:
    first, view = placed(
        ClusterView.build(cliques=[rack("r0")], reservations=[]),
        GangRequest(domain="ml/a", new_pods=5, gpus_per_pod=2),
    )

    again = place(view, grow_to("ml/a", 5, gpus_per_pod=2))

    assert again == Placed(domain="ml/a", reservations=first.reservations)


def test_a_smaller_request_places_nothing_and_releases_nothing() -> None:
    first, view = placed(
        ClusterView.build(cliques=[rack("r0")], reservations=[]),
        GangRequest(domain="ml/a", new_pods=5, gpus_per_pod=2),
    )

    smaller = place(view, grow_to("ml/a", 2, gpus_per_pod=2))

    assert smaller == Placed(domain="ml/a", reservations=first.reservations)


def test_a_domain_cannot_change_its_pod_size() -> None:
    view = ClusterView.build(cliques=[rack("r0")], reservations=[whole_nodes("ml/a", "r0", [0])])

    decision = place(view, GangRequest(domain="ml/a", new_pods=4, gpus_per_pod=1))

    assert decision == NotPlaced(
        domain="ml/a",
        reason=Reason.INVALID_REQUEST,
        message="domain ml/a holds pods of 4 GPUs; it cannot add pods of 1 GPU",
    )


def test_a_domain_whose_clique_is_gone_waits_with_a_reason() -> None:
    view = ClusterView.build(cliques=[rack("r1")], reservations=[whole_nodes("ml/a", "r0", [0, 1])])

    decision = place(view, grow_to("ml/a", 3, gpus_per_pod=4))

    assert isinstance(decision, NotPlaced)
    assert decision.reason is Reason.CLIQUE_UNAVAILABLE


def test_a_replacement_after_a_node_failure_goes_to_a_healthy_node_of_the_same_clique() -> None:
    placement, view = placed(
        ClusterView.build(cliques=[rack("r0", nodes=4), rack("r1")], reservations=[]),
        GangRequest(domain="ml/a", new_pods=2, gpus_per_pod=4),
    )
    assert placement.pod_nodes == (tray("r0", 0), tray("r0", 1))
    # Tray 0 fails: its pod is gone and the tray is unusable.
    view = view.with_clique(rack("r0", nodes=4, unhealthy=[0]))
    shrunk = release(placement.reservations[0], pods_by_node={tray("r0", 0): 1})
    view = view.with_domain("ml/a", [shrunk])

    replacement, view = placed(view, grow_to("ml/a", 2, gpus_per_pod=4))

    assert replacement.slices[0].pod_nodes == (tray("r0", 2),)
    assert replacement.slices[0].channel == placement.slices[0].channel


def test_a_span_grows_onto_new_nodes_until_it_reaches_its_node_count() -> None:
    view = ClusterView.build(
        cliques=[rack("r0", nodes=6)],
        reservations=[holding("ml/a", "r0", pods_by_slot={0: 2, 1: 2}, gpus_per_pod=1)],
    )

    placement, _ = placed(view, grow_to("ml/a", 8, gpus_per_pod=1, span=4))

    assert pods_per_node(placement) == {tray("r0", 2): 2, tray("r0", 3): 2}


def test_a_span_smaller_than_the_nodes_already_used_is_refused() -> None:
    view = ClusterView.build(
        cliques=[rack("r0")],
        reservations=[holding("ml/a", "r0", pods_by_slot={0: 1, 1: 1, 2: 1}, gpus_per_pod=1)],
    )

    decision = place(view, grow_to("ml/a", 4, gpus_per_pod=1, span=2))

    assert isinstance(decision, NotPlaced)
    assert decision.reason is Reason.INVALID_REQUEST
    assert "already spans 3 nodes" in decision.message


def test_a_sliced_domain_grows_by_whole_new_slices_and_keeps_its_old_ones() -> None:
    first, view = placed(
        ClusterView.build(cliques=[rack("r0"), rack("r1")], reservations=[]),
        GangRequest(domain="ml/s", new_pods=18, gpus_per_pod=4, slice_pods=18),
    )

    grown, _ = placed(view, GangRequest(domain="ml/s", new_pods=18, gpus_per_pod=4, slice_pods=18))

    assert [s.slice_index for s in grown.slices] == [1]
    assert grown.slices[0].clique == "r1"
    assert grown.reservations[0] == first.reservations[0]


# --- release ---------------------------------------------------------------------------------


def test_release_returns_the_pods_gpus_to_the_nodes() -> None:
    placement, view = placed(
        ClusterView.build(cliques=[rack("r0", nodes=2)], reservations=[]),
        GangRequest(domain="ml/a", new_pods=6, gpus_per_pod=1),
    )

    shrunk = release(placement.reservations[0], pods_by_node={tray("r0", 0): 3, tray("r0", 1): 1})
    view = view.with_domain("ml/a", [shrunk])

    assert shrunk.shares == (
        NodeShare(node=tray("r0", 0), pods=1),
        NodeShare(node=tray("r0", 1), pods=1),
    )
    assert free_gpus(view, "r0") == {tray("r0", 0): 3, tray("r0", 1): 3}


def test_a_fully_released_reservation_keeps_its_clique_and_channel() -> None:
    reservation = whole_nodes("ml/a", "r0", [0], channel=7)

    empty = release(reservation, pods_by_node={tray("r0", 0): 1})

    assert empty.shares == ()
    assert (empty.clique, empty.channel) == ("r0", 7)


@pytest.mark.parametrize(
    "pods_by_node", [{tray("r0", 0): 2}, {tray("r0", 5): 1}, {tray("r0", 0): -1}]
)
def test_releasing_pods_a_node_does_not_hold_is_an_error(pods_by_node: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="cannot release"):
        release(whole_nodes("ml/a", "r0", [0]), pods_by_node=pods_by_node)


def test_a_released_domain_keeps_its_channel_and_others_cannot_take_it() -> None:
    reservation = release(
        whole_nodes("ml/a", "r0", [0], channel=0), pods_by_node={tray("r0", 0): 1}
    )
    view = ClusterView.build(cliques=[rack("r0")], reservations=[reservation])

    placement, _ = placed(view, GangRequest(domain="ml/b", new_pods=1, gpus_per_pod=4))

    assert placement.slices[0].channel == 1


# --- failover ---------------------------------------------------------------------------------


def test_a_moved_slice_goes_whole_to_another_clique_on_its_channel_there() -> None:
    view = ClusterView.build(
        cliques=[rack("r0", nodes=4), rack("r1", nodes=4), rack("r2", nodes=4)],
        reservations=[
            whole_nodes("ml/a", "r0", [0, 1]),
            holding("ml/a", "r1", pods_by_slot={0: 1, 1: 1}, slice_index=1, channel=0),
            whole_nodes("busy/b", "r2", [0, 1, 2]),
        ],
    )
    request = GangRequest(
        domain="ml/a", gpus_per_pod=4, moves=(SliceTarget(slice_index=1, pods=2),)
    )

    placement, after = placed(view, request)

    moved = {r.slice_index: r for r in placement.reservations}[1]
    assert moved.clique == "r0" and moved.channel == 0  # the domain's channel in r0
    assert [s.node for s in moved.shares] == [tray("r0", 2), tray("r0", 3)]
    assert free_gpus(after, "r1") == dict.fromkeys((tray("r1", slot) for slot in range(4)), 4)


def test_a_move_with_no_other_clique_with_room_places_nothing() -> None:
    view = ClusterView.build(
        cliques=[rack("r0", nodes=2), rack("r1", nodes=2)],
        reservations=[whole_nodes("ml/a", "r1", [0, 1]), whole_nodes("busy/b", "r0", [0])],
    )

    decision = place(
        view,
        GangRequest(domain="ml/a", gpus_per_pod=4, moves=(SliceTarget(slice_index=0, pods=2),)),
    )

    assert isinstance(decision, NotPlaced)
    assert decision.reason is Reason.INSUFFICIENT_CAPACITY
