"""The breaker's shell on the claimant's side: it reads only its own Node, notes when it first
saw the answer to its claim (on its own clock), and an offer of room to its held record."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from services.health_monitor.fleet import Fleet
from services.health_monitor.metrics import HealthMetrics
from services.health_monitor.settings import BreakerSettings
from shared.breaker import Record, RecordState, Verdict, encode_record, encode_verdict
from shared.crds.names import BREAKER_ANNOTATION, BREAKER_VERDICT_ANNOTATION, CLIQUE_LABEL
from shared.kube.models import Node
from shared.metrics import Metrics

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
RACK = "u.1"


def node(record: Record | None = None, verdict: Verdict | None = None) -> Node:
    annotations = {}
    if record is not None:
        annotations[BREAKER_ANNOTATION] = encode_record(record)
    if verdict is not None:
        annotations[BREAKER_VERDICT_ANNOTATION] = encode_verdict(verdict)
    body: dict[str, Any] = {
        "metadata": {"name": "me", "labels": {CLIQUE_LABEL: RACK}, "annotations": annotations}
    }
    return msgspec.convert(body, Node)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


def fleet(clock: Clock) -> Fleet:
    return Fleet(
        node_name="me",
        settings=BreakerSettings(claim_timeout_s=30),
        metrics=HealthMetrics(Metrics()),
        wall_clock=clock,
    )


def test_an_answer_is_timed_from_when_this_monitor_first_saw_it() -> None:
    clock = Clock()
    shell = fleet(clock)
    claim = Record(state=RecordState.PENDING, at=NOW, clique=RACK, decide_within_s=15)
    assert not shell.observe(node(claim))  # no answer yet
    clock.now = NOW + timedelta(seconds=2)
    answered = node(claim, Verdict(claim=NOW, granted=True, window_s=600))
    assert shell.observe(answered)
    assert shell.verdict is not None and shell.verdict.granted
    assert shell.verdict.decided_at == NOW + timedelta(seconds=2)
    # Seen again later (a relist, another change of the Node): still its first sighting.
    clock.now = NOW + timedelta(seconds=20)
    assert not shell.observe(answered)
    assert shell.verdict.decided_at == NOW + timedelta(seconds=2)


def test_an_answer_to_another_claim_is_no_answer() -> None:
    shell = fleet(Clock())
    claim = Record(state=RecordState.PENDING, at=NOW, clique=RACK)
    earlier = NOW - timedelta(seconds=30)
    assert not shell.observe(node(claim, Verdict(claim=earlier, granted=True)))
    assert shell.verdict is None


def test_an_offer_of_room_wakes_a_held_node_once() -> None:
    shell = fleet(Clock())
    hold = Record(state=RecordState.HELD, at=NOW, clique=RACK, held_since=NOW)
    refusal = Verdict(claim=NOW, scope="clique", clique=RACK, counted=4, size=18, limit=4)
    assert not shell.observe(node(hold, refusal))
    # A monitor that restarted while held reads why from the refusal on its Node.
    assert shell.withheld is not None and shell.withheld.limit == 4
    offer = Verdict(claim=NOW, room=True)
    assert shell.observe(node(hold, offer))
    assert shell.room == NOW
    assert not shell.observe(node(hold, offer))
