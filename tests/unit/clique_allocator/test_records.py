"""The Placement record and the engine's reservation, both ways."""

from __future__ import annotations

import msgspec

from services.clique_allocator.placement import NodeShare, Reservation
from services.clique_allocator.records import (
    FOREIGN,
    foreign_reservation,
    owned_by,
    placement_manifest,
    record_of,
    reservation_of,
)
from shared.crds.placement import Placement

from .builders import CLIQUE_A, domain, record


def test_a_record_is_a_reservation_of_its_slots() -> None:
    spec = record(("a-n00", 2, ("p0",)), ("a-n01", 1, ()), gpus_per_pod=2, channel=3)
    assert reservation_of("default/train", spec) == Reservation(
        domain="default/train",
        clique=CLIQUE_A,
        channel=3,
        gpus_per_pod=2,
        shares=(NodeShare(node="a-n00", pods=2), NodeShare(node="a-n01", pods=1)),
    )


def test_record_of_orders_members_by_slot_and_names_pods() -> None:
    reservation = Reservation(
        domain="default/train",
        clique=CLIQUE_A,
        channel=1,
        gpus_per_pod=4,
        shares=(NodeShare(node="z", pods=1), NodeShare(node="a", pods=1)),
    )
    spec = record_of(reservation, size=2, pods_by_node={"z": ["p1"]}, slots={"z": 0, "a": 5})
    assert [(m.node, m.slot, m.gpus, m.pods) for m in spec.members] == [
        ("z", 0, 4, ("p1",)),
        ("a", 5, 4, ()),
    ]
    assert (spec.size, spec.channel) == (2, 1)


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
