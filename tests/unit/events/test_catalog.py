from datetime import UTC, datetime

import msgspec
import pytest

from shared.events import (
    EVENT_TYPES,
    CliqueCapacity,
    DomainMembershipChanged,
    Event,
    NodeFault,
    NodeImexState,
    NodeRecovered,
    event_class,
)
from shared.events.registry import UNION_DECODER
from tests.unit.events.samples import sample_events


def test_every_type_has_a_sample_and_a_unique_ce_type() -> None:
    samples = sample_events()
    assert {type(e) for e in samples} == set(EVENT_TYPES)
    types = [cls.ce_type() for cls in EVENT_TYPES]
    assert len(set(types)) == len(types)
    for cls in EVENT_TYPES:
        assert event_class(cls.ce_type()) is cls
    assert event_class("dev.cdo.v1.unknown") is None


@pytest.mark.parametrize("event", sample_events(), ids=lambda e: type(e).__name__)
def test_payload_is_self_describing(event: Event) -> None:
    payload = msgspec.json.encode(event)
    assert UNION_DECODER.decode(payload) == event
    body = msgspec.json.decode(payload)
    assert body["type"] == event.ce_type()
    assert {"id", "time", "source"} <= body.keys()


def test_ids_are_unique_and_time_is_utc() -> None:
    a, b = NodeRecovered(node="n"), NodeRecovered(node="n")
    assert a.id != b.id
    assert a.time.tzinfo is not None and a.time.utcoffset() == UTC.utcoffset(None)


def test_new_fields_are_ignored_by_old_decoders_and_defaults_fill_missing() -> None:
    """Schemas evolve additively: a newer producer's extra fields and an older producer's
    missing optional fields both decode."""
    newer = msgspec.json.encode(
        {
            "type": NodeFault.ce_type(),
            "node": "n1",
            "signal": "xid",
            "severity": "fatal",
            "a_field_from_the_future": {"x": 1},
        }
    )
    event = msgspec.json.decode(newer, type=NodeFault)
    assert event.node == "n1" and event.gpus == () and event.action == "none"


def test_unknown_enum_like_values_still_decode() -> None:
    payload = msgspec.json.encode(
        {"type": NodeImexState.ce_type(), "node": "n1", "daemon_state": "SOME_NEW_STATE"}
    )
    assert msgspec.json.decode(payload, type=NodeImexState).daemon_state == "SOME_NEW_STATE"


def test_invalid_values_name_the_field() -> None:
    payload = msgspec.json.encode(
        {"type": CliqueCapacity.ce_type(), "clique": "c", "gpus_free": -1}
    )
    with pytest.raises(msgspec.ValidationError, match=r"\$\.gpus_free"):
        msgspec.json.decode(payload, type=CliqueCapacity)


def test_subjects_and_snapshot_keys() -> None:
    membership = DomainMembershipChanged(namespace="default", name="d.1")
    assert membership.subject() == "cdo.v1.domain.default.d=2E1.membership"
    assert membership.snapshot_key() == "v1.domain.default.d=2E1"
    assert membership.ce_subject() == "default/d.1"
    fault = NodeFault(node="n", signal="xid", severity="fatal")
    recovered = NodeRecovered(node="n")
    assert fault.snapshot_key() == recovered.snapshot_key() == "v1.node.n.health"
    assert fault.time <= datetime.now(UTC)
