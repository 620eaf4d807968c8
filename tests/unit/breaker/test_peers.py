"""The breaker's state on a Node: the record and verdict annotations and what a Node counts for."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from shared.breaker import (
    BreakerCaps,
    Peer,
    Record,
    RecordState,
    Verdict,
    counts,
    decode_record,
    decode_verdict,
    encode_record,
    encode_verdict,
    expires_at,
    peer_of,
)
from shared.crds.names import (
    BREAKER_ANNOTATION,
    BREAKER_VERDICT_ANNOTATION,
    CLIQUE_LABEL,
    GPU_FAULT_TAINT,
    GPU_HEALTHY_CONDITION,
)
from shared.kube.models import Node

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
CAPS = BreakerCaps(window_s=600, claim_timeout_s=30)


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def node(
    name: str = "n1",
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    taints: list[dict[str, Any]] | None = None,
    condition: bool = False,
) -> Node:
    body: dict[str, Any] = {
        "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
        "spec": {"taints": taints or []},
        "status": {
            "conditions": [{"type": GPU_HEALTHY_CONDITION, "status": "True"}] if condition else []
        },
    }
    return msgspec.convert(body, Node)


def test_a_record_survives_the_annotation() -> None:
    record = Record(state=RecordState.HELD, at=NOW, clique="u.1", held_since=ago(5))
    assert decode_record(encode_record(record)) == record
    assert encode_record(Record(state=RecordState.PENDING, at=NOW)) == (
        '{"state":"pending","at":"2025-06-01T12:00:00Z"}'
    )


def test_a_verdict_survives_the_annotation() -> None:
    verdict = Verdict(claim=NOW, scope="clique", clique="u.1", counted=4, size=18, limit=4)
    assert decode_verdict(encode_verdict(verdict)) == verdict
    assert encode_verdict(Verdict(claim=NOW, granted=True, window_s=600)) == (
        '{"claim":"2025-06-01T12:00:00Z","granted":true,"window_s":600}'
    )


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "not json",
        '{"state":"maybe","at":"2025-06-01T12:00:00Z"}',
        '{"state":"held"}',
        '{"state":"held","at":"2025-06-01T12:00:00"}',
    ],
    ids=["absent", "empty", "garbage", "unknown-state", "no-time", "no-timezone"],
)
def test_an_unreadable_record_counts_as_none(text: str | None) -> None:
    assert decode_record(text) is None


@pytest.mark.parametrize(
    "text", [None, "", "[]", '{"granted":true}', '{"claim":"2025-06-01T12:00:00"}']
)
def test_an_unreadable_verdict_answers_nothing(text: str | None) -> None:
    assert decode_verdict(text) is None


def test_peer_of_a_node() -> None:
    record = Record(state=RecordState.GRANTED, at=NOW, clique="u.7")
    tainted = node(
        labels={CLIQUE_LABEL: "u.1"},
        annotations={BREAKER_ANNOTATION: encode_record(record)},
        taints=[
            {"key": "other", "effect": "NoExecute"},
            {"key": GPU_FAULT_TAINT, "value": "fatal", "effect": "NoExecute"},
        ],
    )
    assert peer_of(tainted) == Peer(
        name="n1", clique="u.1", monitored=True, no_execute=True, record=record
    )
    # Without its label (a fabric fault took it), the record keeps the node in its clique.
    unlabelled = node(annotations={BREAKER_ANNOTATION: encode_record(record)})
    assert peer_of(unlabelled).clique == "u.7"
    # NoSchedule, or another writer's NoExecute, is not NoExecute from the monitor.
    degraded = node(taints=[{"key": GPU_FAULT_TAINT, "value": "warning", "effect": "NoSchedule"}])
    assert not peer_of(degraded).no_execute
    assert not peer_of(node(taints=[{"key": "other", "effect": "NoExecute"}])).no_execute
    # Monitored: a health monitor wrote its condition there.
    assert peer_of(node(condition=True)).monitored
    assert not peer_of(node()).monitored


def annotated(record: Record | None, verdict: Verdict | None) -> Node:
    annotations = {}
    if record is not None:
        annotations[BREAKER_ANNOTATION] = encode_record(record)
    if verdict is not None:
        annotations[BREAKER_VERDICT_ANNOTATION] = encode_verdict(verdict)
    return node(annotations=annotations)


def test_a_verdict_counts_only_for_the_record_it_answers() -> None:
    claim = Record(state=RecordState.PENDING, at=ago(1))
    grant = Verdict(claim=ago(1), granted=True)
    peer = peer_of(annotated(claim, grant))
    assert (peer.verdict, peer.granted_at, peer.stale_verdict) == (grant, ago(1), False)
    # An answer to an earlier claim answers nothing now, and goes.
    older = peer_of(annotated(claim, Verdict(claim=ago(9), granted=True)))
    assert (older.verdict, older.granted_at, older.stale_verdict) == (None, None, True)
    # A refusal answers, but reserves nothing; a grant acted on (granted record) is stale.
    refused = peer_of(annotated(claim, Verdict(claim=ago(1))))
    assert refused.verdict is not None and refused.granted_at is None
    acted = Record(state=RecordState.GRANTED, at=ago(1))
    assert peer_of(annotated(acted, Verdict(claim=ago(1), granted=True))).stale_verdict
    # No record any more: the verdict goes.
    assert peer_of(annotated(None, grant)).stale_verdict


@pytest.mark.parametrize(
    ("peer", "counted", "until"),
    [
        (Peer(name="a"), False, None),
        (Peer(name="a", no_execute=True), True, None),
        (Peer(name="a", record=Record(state=RecordState.PENDING, at=ago(1))), False, None),
        (
            Peer(
                name="a",
                record=Record(state=RecordState.PENDING, at=ago(5)),
                granted_at=ago(29),
            ),
            True,
            ago(-1),
        ),
        (
            Peer(
                name="a",
                record=Record(state=RecordState.PENDING, at=ago(5), decide_within_s=20),
                granted_at=ago(30),
            ),
            True,
            ago(-10),
        ),
        (
            Peer(
                name="a",
                record=Record(state=RecordState.PENDING, at=ago(5)),
                granted_at=ago(30),
            ),
            False,
            None,
        ),
        (Peer(name="a", record=Record(state=RecordState.GRANTED, at=ago(599))), True, ago(-1)),
        (Peer(name="a", record=Record(state=RecordState.GRANTED, at=ago(600))), False, None),
        (Peer(name="a", record=Record(state=RecordState.HELD, at=ago(1))), False, None),
        (
            Peer(name="a", no_execute=True, record=Record(state=RecordState.GRANTED, at=ago(900))),
            True,
            None,
        ),
    ],
    ids=[
        "nothing",
        "tainted",
        "claim-alone",
        "grant-not-acted-on",
        "grant-held-twice-the-claims-reaction-time",
        "grant-not-acted-on-past-the-timeout",
        "grant-in-window",
        "grant-past-window",
        "held",
        "tainted-past-window",
    ],
)
def test_what_counts_against_the_caps(peer: Peer, counted: bool, until: datetime | None) -> None:
    assert counts(peer, now=NOW, caps=CAPS) is counted
    assert expires_at(peer, now=NOW, caps=CAPS) == until
