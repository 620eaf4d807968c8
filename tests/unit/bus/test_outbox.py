"""How the outbox reads an answer to a publish, and which events are overdue (pure parts)."""

from __future__ import annotations

import pytest

from shared.bus.outbox import Outbox, ack_outcome
from shared.metrics import Metrics


@pytest.mark.parametrize(
    ("headers", "data", "expected"),
    [
        (None, b'{"stream":"CDO","seq":7}', ("stored", "")),
        ({}, b'{"stream":"CDO","seq":7,"duplicate":true}', ("duplicate", "")),
        ({"Status": "503"}, b"", ("no_stream", "")),
        (None, b'{"error":{"code":503,"description":"no stream"}}', ("rejected", "503: no stream")),
        (None, b"not json", ("malformed", None)),
        (None, b'{"stream":"CDO"}', ("malformed", "no stream and sequence")),
    ],
)
def test_answers_to_a_publish(
    headers: dict[str, str] | None, data: bytes, expected: tuple[str, str | None]
) -> None:
    outcome, error = ack_outcome(headers, data)
    assert outcome == expected[0]
    if expected[1] is not None:
        assert error == expected[1]


async def test_overdue_events_come_oldest_send_first_and_a_resend_moves_to_the_end() -> None:
    sent: list[str] = []

    async def send(subject: str, block: bytes, payload: bytes, reply: str) -> None:
        sent.append(reply)

    now = [0.0]
    outbox = Outbox(
        send=send,
        metrics=Metrics(),
        capacity=10,
        ack_timeout_s=1.0,
        connected=lambda: True,
        clock=lambda: now[0],
    )
    for at in (0.0, 0.5, 0.9):
        now[0] = at
        await outbox.publish("s", b"", b"")
    now[0] = 1.6
    assert outbox.due(now[0]) == ["1", "2"]
    assert await outbox.resend_due() == 2
    assert sent[-2:] == ["1", "2"]  # not started: no inbox prefix
    now[0] = 2.0
    assert outbox.due(now[0]) == ["3"]


async def test_while_disconnected_events_are_kept_unsent_and_sent_in_order_on_connect() -> None:
    sent: list[str] = []

    async def send(subject: str, block: bytes, payload: bytes, reply: str) -> None:
        sent.append(subject)

    online = [False]
    metrics = Metrics()
    outbox = Outbox(
        send=send, metrics=metrics, capacity=2, ack_timeout_s=1.0, connected=lambda: online[0]
    )
    for subject in ("a", "b", "c"):
        await outbox.publish(subject, b"", b"")
    assert sent == [] and outbox.pending == 2  # the oldest dropped from the full outbox
    assert metrics.registry.get_sample_value("cdo_bus_outbox_dropped_total") == 1
    online[0] = True
    assert await outbox.send_all() == 2
    assert sent == ["b", "c"]


async def test_plain_an_event_leaves_the_outbox_once_sent() -> None:
    replies: list[str] = []

    async def send(subject: str, block: bytes, payload: bytes, reply: str) -> None:
        replies.append(reply)

    outbox = Outbox(
        send=send, metrics=Metrics(), capacity=10, ack_timeout_s=1.0, connected=lambda: True
    )
    outbox.plain = True
    await outbox.publish("a", b"", b"")
    assert replies == [""] and outbox.pending == 0
    assert await outbox.settled(0.01)
