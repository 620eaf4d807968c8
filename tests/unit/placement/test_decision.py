"""Decisions and reservations travel as JSON (recorded by the allocator, decoded after restart)."""

from __future__ import annotations

import msgspec
import pytest

from services.clique_allocator.placement import (
    ClusterView,
    Decision,
    GangRequest,
    NotPlaced,
    Reason,
    Reservation,
    place,
)
from tests.unit.placement.clusters import placed, rack


def test_a_placement_round_trips_through_json() -> None:
    placement, _ = placed(
        ClusterView.build(cliques=[rack("r0")], reservations=[]),
        GangRequest(domain="ml/a", new_pods=6, gpus_per_pod=1),
    )

    encoded = msgspec.json.encode(placement)

    assert msgspec.json.decode(encoded, type=Decision) == placement
    assert b'"type":"Placed"' in encoded


def test_not_placed_round_trips_with_its_reason() -> None:
    decision = place(
        ClusterView.build(cliques=[rack("r0")], reservations=[]),
        GangRequest(domain="ml/a", new_pods=19, gpus_per_pod=4),
    )

    decoded = msgspec.json.decode(msgspec.json.encode(decision), type=Decision)

    assert isinstance(decoded, NotPlaced)
    assert decoded.reason is Reason.LARGER_THAN_CLUSTER


@pytest.mark.parametrize(
    "document",
    [
        b'{"domain":"a","clique":"c","channel":2048,"gpus_per_pod":1}',
        b'{"domain":"a","clique":"c","channel":0,"gpus_per_pod":0}',
        b'{"domain":"a","clique":"c","channel":0,"gpus_per_pod":1,"shares":[{"node":"n","pods":0}]}',
    ],
)
def test_recorded_reservations_out_of_range_are_rejected_when_decoded(document: bytes) -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(document, type=Reservation)
