"""The cluster view: free GPUs derived from reservations, incremental updates, bad input."""

from __future__ import annotations

import pytest

from services.clique_allocator.placement import Clique, ClusterView, Node, NodeShare, Reservation
from tests.unit.placement.clusters import free_gpus, holding, rack, tray, whole_nodes


def test_free_gpus_are_the_node_size_less_every_share() -> None:
    view = ClusterView.build(
        cliques=[rack("r0", nodes=2)],
        reservations=[
            holding("a", "r0", pods_by_slot={0: 1}, gpus_per_pod=2),
            holding("b", "r0", pods_by_slot={0: 1, 1: 3}, gpus_per_pod=1, channel=1),
        ],
    )

    assert free_gpus(view, "r0") == {tray("r0", 0): 1, tray("r0", 1): 1}


def test_a_node_holding_more_than_it_has_has_nothing_free() -> None:
    view = ClusterView.build(
        cliques=[rack("r0", nodes=1, gpus=2)], reservations=[whole_nodes("a", "r0", [0])]
    )

    assert free_gpus(view, "r0") == {tray("r0", 0): 0}


def test_reservations_on_vanished_nodes_and_cliques_are_kept_but_hold_nothing() -> None:
    gone = Reservation(
        domain="a", clique="old", channel=0, gpus_per_pod=4,
        shares=(NodeShare(node="old-t00", pods=1),),
    )  # fmt: skip
    view = ClusterView.build(cliques=[rack("r0", nodes=1)], reservations=[gone])

    assert view.reservations_of("a") == (gone,)
    assert free_gpus(view, "r0") == {tray("r0", 0): 4}


def test_shares_count_on_the_clique_their_node_is_in_now() -> None:
    # Tray r0-t00 was relabelled into clique "p1"; the domain's reservation still says r0.
    moved = Clique(id="p1", nodes=(Node(name=tray("r0", 0), slot=0, gpus=4),))
    view = ClusterView.build(
        cliques=[Clique(id="r0", nodes=()), moved],
        reservations=[whole_nodes("a", "r0", [0])],
    )

    assert free_gpus(view, "p1") == {tray("r0", 0): 0}
    state = view.clique("r0")
    assert state is not None and state.domain_channels == {"a": 0}


def test_an_updated_view_equals_one_built_from_scratch() -> None:
    cliques = [rack("r0", nodes=3), rack("r1", nodes=3)]
    first = holding("a", "r0", pods_by_slot={0: 1, 1: 2}, gpus_per_pod=2)
    second = holding("b", "r1", pods_by_slot={2: 4}, gpus_per_pod=1)
    view = ClusterView.build(cliques=cliques, reservations=[first])

    updated = (
        view.with_domain("b", [second])
        .with_domain("a", [])
        .with_clique(rack("r0", nodes=3, cordoned=[1]))
    )
    rebuilt = ClusterView.build(
        cliques=[rack("r0", nodes=3, cordoned=[1]), cliques[1]], reservations=[second]
    )

    assert updated.cliques == rebuilt.cliques
    assert updated.reservations == rebuilt.reservations
    assert view.reservations == (first,)  # the old view is unchanged


def test_a_node_joins_a_clique_it_was_holding_shares_on() -> None:
    view = ClusterView.build(
        cliques=[rack("r0", nodes=1)],
        reservations=[holding("a", "r0", pods_by_slot={1: 2}, gpus_per_pod=1)],
    )

    grown = view.with_clique(rack("r0", nodes=2))

    assert free_gpus(grown, "r0") == {tray("r0", 0): 4, tray("r0", 1): 2}


def test_the_view_is_the_same_whatever_order_its_input_comes_in() -> None:
    cliques = [rack("r1", nodes=2), rack("r0", nodes=2)]
    reservations = [whole_nodes("b", "r1", [1], channel=1), whole_nodes("a", "r1", [0])]

    one = ClusterView.build(cliques=cliques, reservations=reservations)
    other = ClusterView.build(cliques=cliques[::-1], reservations=reservations[::-1])

    assert one.cliques == other.cliques
    assert [state.id for state in one.cliques] == ["r0", "r1"]
    assert one.reservations == other.reservations


@pytest.mark.parametrize(
    ("cliques", "reservations", "message"),
    [
        ([rack("r0"), rack("r0")], [], "clique r0 is listed twice"),
        (
            [
                rack("r0", nodes=1),
                Clique(id="r1", nodes=(Node(name=tray("r0", 0), slot=0, gpus=4),)),
            ],
            [],
            "node r0-t00 is listed twice",
        ),
        (
            [rack("r0")],
            [whole_nodes("a", "r0", [0]), whole_nodes("a", "r0", [1])],
            "domain a has two reservations for slice 0",
        ),
    ],
)
def test_input_no_cluster_can_produce_is_refused(
    cliques: list[Clique], reservations: list[Reservation], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        ClusterView.build(cliques=cliques, reservations=reservations)


def test_a_node_moves_between_cliques_by_leaving_first() -> None:
    view = ClusterView.build(cliques=[rack("r0", nodes=2), rack("r1", nodes=1)], reservations=[])
    joining = Clique(
        id="r1", nodes=(*rack("r1", nodes=1).nodes, Node(name=tray("r0", 1), slot=1, gpus=4))
    )

    with pytest.raises(ValueError, match="listed twice"):
        view.with_clique(joining)
    moved = view.with_clique(rack("r0", nodes=1)).with_clique(joining)

    assert set(free_gpus(moved, "r1")) == {tray("r1", 0), tray("r0", 1)}
    assert moved.clique_of(tray("r0", 1)) == "r1"


def test_changing_a_view_leaves_the_old_one_as_it_was() -> None:
    view = ClusterView.build(cliques=[rack("r0", nodes=2)], reservations=[])

    changed = view.with_clique(rack("r0", nodes=1)).with_domain("a", [whole_nodes("a", "r0", [0])])

    assert view.clique_of(tray("r0", 1)) == "r0"
    assert free_gpus(view, "r0") == {tray("r0", 0): 4, tray("r0", 1): 4}
    assert changed.clique_of(tray("r0", 1)) is None
    assert free_gpus(changed, "r0") == {tray("r0", 0): 0}
