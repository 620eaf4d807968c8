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
