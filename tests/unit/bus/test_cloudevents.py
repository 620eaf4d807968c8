"""Binary-mode CloudEvents: our codec, its errors, and interop with the CloudEvents SDK."""

from datetime import UTC, datetime

import msgspec
import pytest
from cloudevents.core.bindings import http as ce_http
from cloudevents.core.v1.event import CloudEvent

from shared.bus import cloudevents
from shared.errors import MalformedEventError, UnknownEventTypeError
from shared.events import DomainMembershipChanged, Event, NodeFault
from tests.unit.events.samples import sample_events


def with_source(event: Event) -> Event:
    return msgspec.structs.replace(event, source="cdo/test/1")


@pytest.mark.parametrize("event", sample_events(), ids=lambda e: type(e).__name__)
def test_round_trip(event: Event) -> None:
    event = with_source(event)
    headers, body = cloudevents.encode(event)
    assert headers["ce-specversion"] == "1.0"
    assert headers["ce-type"] == event.ce_type()
    assert headers["ce-id"] == headers["Nats-Msg-Id"] == event.id
    assert headers["content-type"] == "application/json"
    assert cloudevents.decode(cloudevents.lowercase_headers(headers), body) == event


def test_header_names_are_case_insensitive() -> None:
    event = with_source(sample_events()[0])
    headers, body = cloudevents.encode(event)
    shouting = {name.upper(): value for name, value in headers.items()}
    assert cloudevents.decode(cloudevents.lowercase_headers(shouting), body) == event


def test_headers_win_over_the_body() -> None:
    event = with_source(sample_events()[2])
    headers, body = cloudevents.encode(event)
    headers["ce-id"] = "other-id"
    headers["ce-source"] = "cdo/elsewhere/2"
    headers["ce-time"] = "2030-01-02T03:04:05Z"
    decoded = cloudevents.decode(cloudevents.lowercase_headers(headers), body)
    assert decoded.id == "other-id"
    assert decoded.source == "cdo/elsewhere/2"
    assert decoded.time == datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_values_that_need_it_are_percent_encoded() -> None:
    event = with_source(DomainMembershipChanged(namespace="ns", name="a name%"))
    headers, body = cloudevents.encode(event)
    assert headers["ce-subject"] == "ns/a%20name%25"
    decoded = cloudevents.decode(cloudevents.lowercase_headers(headers), body)
    assert decoded == event


def good() -> tuple[dict[str, str], bytes]:
    headers, body = cloudevents.encode(with_source(sample_events()[2]))
    return cloudevents.lowercase_headers(headers), body


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda h, b: ({}, b), "missing_header"),
        (lambda h, b: ({k: v for k, v in h.items() if k != "ce-specversion"}, b), "missing_header"),
        (lambda h, b: ({**h, "ce-specversion": "0.3"}, b), "specversion"),
        (lambda h, b: ({k: v for k, v in h.items() if k != "ce-source"}, b), "missing_header"),
        (lambda h, b: ({**h, "content-type": "text/plain"}, b), "content_type"),
        (lambda h, b: (h, b"{not json"), "malformed"),
        (lambda h, b: (h, b'{"node": 5, "signal": "xid", "severity": "fatal"}'), "malformed"),
        (lambda h, b: (h, b'{"signal": "xid", "severity": "fatal"}'), "malformed"),
        (lambda h, b: ({**h, "ce-id": "x", "ce-time": "yesterday"}, b), "malformed_header"),
    ],
)
def test_bad_messages_raise_with_a_reason(mutate, reason) -> None:  # type: ignore[no-untyped-def]
    headers, body = mutate(*good())
    with pytest.raises(MalformedEventError) as caught:
        cloudevents.decode(headers, body)
    assert caught.value.reason == reason


def test_unknown_type() -> None:
    headers, body = good()
    with pytest.raises(UnknownEventTypeError) as caught:
        cloudevents.decode({**headers, "ce-type": "dev.cdo.v9.nothing"}, body)
    assert caught.value.reason == "unknown_type"


def test_a_message_written_by_the_sdk_is_accepted() -> None:
    """A producer using the CloudEvents SDK's binary mode, with only data in the body."""
    sdk_event = CloudEvent(
        attributes={
            "type": NodeFault.ce_type(),
            "source": "/someone/else",
            "id": "sdk-42",
            "time": datetime(2026, 5, 1, 12, 0, tzinfo=UTC),
            "subject": "gb200-r1-n03",
            "datacontenttype": "application/json",
        },
        data={"node": "gb200-r1-n03", "signal": "nvlink", "severity": "warning", "code": 2},
    )
    message = ce_http.to_binary_event(sdk_event)
    event = cloudevents.decode(cloudevents.lowercase_headers(message.headers), message.body)
    assert isinstance(event, NodeFault)
    assert (event.id, event.source, event.node, event.code) == (
        "sdk-42",
        "/someone/else",
        "gb200-r1-n03",
        2,
    )
    assert event.time == datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("event", sample_events(), ids=lambda e: type(e).__name__)
def test_a_message_we_write_decodes_with_the_sdk(event: Event) -> None:
    event = with_source(event)
    headers, body = cloudevents.encode(event)
    sdk_event = ce_http.from_binary_event(ce_http.HTTPMessage(headers=headers, body=body))
    assert sdk_event.get_type() == event.ce_type()
    assert sdk_event.get_id() == event.id
    assert sdk_event.get_source() == event.source
    assert sdk_event.get_subject() == event.ce_subject()
    assert sdk_event.get_time() == event.time
    assert sdk_event.get_data() == msgspec.json.decode(body)
