"""The Placement record and the engine's reservations, both ways, in both shapes."""

from __future__ import annotations

import msgspec

from services.clique_allocator.placement import NodeShare, Reservation
from services.clique_allocator.planning.slices import (
    Seat,
    SliceHold,
    holds_of,
    record_of,
    reservations_of,
)
from services.clique_allocator.records import (
    FOREIGN,
    foreign_reservation,
    owned_by,
    placement_manifest,
)
from shared.crds.placement import PlacedPod, Placement, PlacementSpec

from .builders import CLIQUE_A, CLIQUE_B, domain, legacy_record, record, slice_of


def test_a_record_is_a_reservation_per_slice_of_its_slots() -> None:
    spec = PlacementSpec(
        gpus_per_pod=2,
        size=4,
        slices=(
            slice_of(("a-n00", 2, ("p0",)), ("a-n01", 1, ()), gpus_per_pod=2, channel=3),
            slice_of(("b-n00", 1, ()), clique=CLIQUE_B, gpus_per_pod=2, index=1, first_rank=3),
        ),
    )
    assert reservations_of("default/train", spec) == [
        Reservation(
            domain="default/train",
            clique=CLIQUE_A,
            channel=3,
            gpus_per_pod=2,
            shares=(NodeShare(node="a-n00", pods=2), NodeShare(node="a-n01", pods=1)),
        ),
        Reservation(
            domain="default/train",
            slice_index=1,
            clique=CLIQUE_B,
            channel=0,
            gpus_per_pod=2,
            shares=(NodeShare(node="b-n00", pods=1),),
        ),
    ]


def test_a_record_of_the_first_release_reads_as_one_slice_ranked_in_slot_order() -> None:
    old = legacy_record(("a-n01", 1, ("p9",)), ("a-n00", 2, ("p2", "p1")), channel=4, size=3)

    (piece,) = old.all_slices

    assert (piece.index, piece.clique, piece.channel, piece.first_rank, piece.size) == (
        0,
        CLIQUE_A,
        4,
        0,
        3,
    )
    assert [(m.node, [(p.name, p.rank) for p in m.pods]) for m in piece.members] == [
        ("a-n00", [("p1", 0), ("p2", 1)]),
        ("a-n01", [("p9", 2)]),
    ]
    assert old.placed_pods == 3 and old.reserved_pods == 3
    assert reservations_of("default/train", old) == reservations_of(
        "default/train", record(("a-n00", 2, ("p1", "p2")), ("a-n01", 1, ("p9",)), channel=4)
    )


def test_record_of_orders_members_by_slot_and_pods_by_rank() -> None:
    hold = SliceHold(
        index=0,
        clique=CLIQUE_A,
        channel=1,
        size=2,
        slots={"z": 1, "a": 1},
        seats={"p1": Seat(node="z", rank=1), "p0": Seat(node="z", rank=0)},
    )
    spec = record_of([hold], gpus_per_pod=2, size=2, slice_size=None, node_slots={"z": 0, "a": 5})
    (piece,) = spec.slices
    assert [(m.node, m.slot, m.gpus, m.pods) for m in piece.members] == [
        ("z", 0, 2, (PlacedPod(name="p0", rank=0), PlacedPod(name="p1", rank=1))),
        ("a", 5, 2, ()),
    ]
    assert (spec.size, piece.channel) == (2, 1)
    assert holds_of(spec)[0].seats == hold.seats


def test_a_written_record_carries_only_the_slice_shape() -> None:
    body = placement_manifest(domain(), record(("a-n00", 1, ("p0",))))
    assert set(body["spec"]) == {"gpusPerPod", "size", "slices"}


def test_the_manifest_is_owned_by_the_domain_and_decodes_back() -> None:
    cd = domain()
    spec = record(("a-n00", 1, ("p0",)))
    body = placement_manifest(cd, spec, resource_version="42")
    assert body["metadata"]["ownerReferences"][0]["uid"] == "cd-uid"
    assert body["metadata"]["resourceVersion"] == "42"
    decoded = msgspec.json.decode(msgspec.json.encode(body), type=Placement)
    assert decoded.spec == spec
    assert owned_by(decoded, cd)
    assert not owned_by(decoded, domain(uid="successor"))


def test_gpus_outside_every_placement_are_one_reservation_in_no_clique() -> None:
    assert foreign_reservation({}) is None
    held = foreign_reservation({"n2": 1, "n1": 3, "n3": 0})
    assert held is not None
    assert (held.domain, held.clique, held.gpus_per_pod) == (FOREIGN, "", 1)
    assert held.shares == (NodeShare(node="n1", pods=3), NodeShare(node="n2", pods=1))
