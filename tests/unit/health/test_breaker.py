"""The claimant's side of the circuit breaker, table-tested: one node's step (``breaker_step``)
and its deadlines. The caps and the arbiter are tested in tests/unit/breaker and
tests/unit/clique_allocator/test_breaker_rulings.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.health_monitor.breaker import BreakerStep, breaker_step, next_change
from services.health_monitor.faults import Reaction
from services.health_monitor.settings import BreakerSettings
from shared.breaker import CLIQUE, Admission, Record, RecordState

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
SETTINGS = BreakerSettings(claim_timeout_s=30)
RACK = "u.1"
WITHIN = 15.0  # half the claim timeout


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def pending(at: datetime = NOW, **kw: object) -> Record:
    return Record(
        state=RecordState.PENDING,
        at=at,
        clique=RACK,
        decide_within_s=WITHIN,
        **kw,  # type: ignore[arg-type]
    )


def granted(at: datetime = NOW, window_s: float = 600) -> Record:
    return Record(state=RecordState.GRANTED, at=at, clique=RACK, window_s=window_s)


def held(at: datetime = NOW, since: datetime | None = None) -> Record:
    return Record(state=RecordState.HELD, at=at, clique=RACK, held_since=since or at)


HELD_BACK = Admission(
    granted=False, decided_at=NOW, scope=CLIQUE, clique=RACK, counted=4, size=18, limit=4,
    share=0.25, window_s=600,
)  # fmt: skip
NE, NS, NONE = Reaction.NO_EXECUTE, Reaction.NO_SCHEDULE, Reaction.NONE


def answer(ok: bool, *, claim: datetime, seen_at: datetime = NOW) -> Admission:
    return Admission(granted=ok, decided_at=seen_at, claim=claim, clique=RACK, window_s=600)


def step(
    *,
    wants: Reaction = NE,
    raw: Reaction = NE,
    current: Reaction = NONE,
    record: Record | None = None,
    decision: Admission | None = None,
    room: bool = False,
    previous: Admission | None = None,
    settings: BreakerSettings = SETTINGS,
) -> BreakerStep:
    return breaker_step(
        wants=wants,
        raw=raw,
        current=current,
        record=record,
        verdict=decision,
        room=room,
        previous=previous,
        clique=RACK,
        now=NOW,
        settings=settings,
    )


@pytest.mark.parametrize(
    ("kwargs", "cap", "record", "withheld"),
    [
        pytest.param({"wants": NONE, "raw": NONE}, NE, None, False, id="healthy"),
        pytest.param({"wants": NS, "raw": NS}, NE, None, False, id="degraded-needs-no-claim"),
        # While a claim is answered the taint stays as it is: none straight to NoExecute.
        pytest.param({}, NONE, pending(), False, id="fatal-claims-leaving-the-taint"),
        pytest.param(
            {"current": NS}, NS, pending(), False, id="escalation-claims-keeping-noschedule"
        ),
        pytest.param(
            {"record": pending(ago(1))}, NONE, pending(ago(1)), False, id="claim-waits-for-answer"
        ),
        pytest.param(
            {"record": pending(ago(1)), "decision": answer(True, claim=ago(1))},
            NE,
            granted(),
            False,
            id="granted",
        ),
        pytest.param(
            {"record": pending(ago(1)), "decision": answer(True, claim=ago(9))},
            NONE,
            pending(ago(1)),
            False,
            id="an-answer-to-another-claim-is-ignored",
        ),
        # No answer in time (the arbiter may be down): claim again, NoSchedule meanwhile.
        pytest.param(
            {"record": pending(ago(16))},
            NS,
            pending(waiting_since=ago(16)),
            False,
            id="unanswered-claim-is-made-again-with-noschedule",
        ),
        pytest.param(
            {"record": pending(ago(1), waiting_since=ago(40))},
            NS,
            pending(ago(1), waiting_since=ago(40)),
            False,
            id="still-waiting-keeps-noschedule",
        ),
        pytest.param(
            {
                "record": pending(ago(1), waiting_since=ago(40)),
                "decision": answer(True, claim=ago(1)),
            },
            NE,
            granted(),
            False,
            id="an-answer-at-last-is-acted-on",
        ),
        pytest.param(
            {
                "record": pending(ago(20)),
                "decision": answer(True, claim=ago(20), seen_at=ago(1)),
            },
            NS,
            pending(waiting_since=ago(20)),
            False,
            id="a-late-answer-is-not-acted-on",
        ),
        pytest.param({"current": NE}, NE, None, False, id="already-tainted-keeps-it"),
        pytest.param(
            {"current": NE, "record": pending(ago(1))},
            NE,
            Record(state=RecordState.GRANTED, at=NOW, clique=RACK),
            False,
            id="tainted-after-restart-turns-its-claim-into-a-grant",
        ),
        pytest.param(
            {"record": granted(ago(60))}, NE, granted(ago(60)), False, id="fresh-grant-reused"
        ),
        pytest.param(
            {"record": granted(ago(60), window_s=30)},
            NONE,
            pending(),
            False,
            id="the-window-is-the-one-the-answer-named",
        ),
        pytest.param(
            {"record": granted(ago(601))}, NONE, pending(), False, id="old-grant-claims-again"
        ),
        pytest.param(
            {"wants": NONE, "raw": NONE, "record": granted(ago(60))},
            NE,
            granted(ago(60)),
            False,
            id="recovered-grant-counts-out-its-window",
        ),
        pytest.param(
            {"wants": NONE, "raw": NONE, "record": granted(ago(601))},
            NE,
            None,
            False,
            id="recovered-grant-past-window-removed",
        ),
        pytest.param(
            {"wants": NONE, "raw": NONE, "record": held(ago(5))},
            NE,
            None,
            False,
            id="recovered-while-held",
        ),
        pytest.param(
            {"wants": NE, "raw": NONE, "record": held(ago(5))},
            NS,
            None,
            False,
            id="hold-down-alone-never-evicts-a-held-node",
        ),
        pytest.param(
            {"wants": NE, "raw": NONE}, NS, None, False, id="hold-down-alone-claims-nothing"
        ),
        pytest.param(
            {
                "wants": NE,
                "raw": NONE,
                "record": pending(ago(1)),
                "decision": answer(True, claim=ago(1)),
            },
            NE,
            granted(),
            False,
            id="a-first-claim-in-flight-is-decided-for-the-hold-down",
        ),
        pytest.param(
            {"wants": NE, "raw": NONE, "record": pending(ago(1), held_since=ago(30))},
            NS,
            None,
            False,
            id="a-retry-is-dropped-once-the-fault-is-gone",
        ),
        pytest.param(
            {"wants": NE, "raw": NONE, "record": pending(ago(16))},
            NS,
            None,
            False,
            id="an-unanswered-claim-is-not-made-again-once-the-fault-is-gone",
        ),
        pytest.param(
            {"current": NS, "record": held(ago(5))},
            NS,
            held(ago(5)),
            True,
            id="held-until-the-arbiter-offers-room",
        ),
        pytest.param(
            {"current": NS, "record": held(ago(5), since=ago(50)), "room": True},
            NS,
            pending(held_since=ago(50)),
            True,
            id="held-claims-again-when-offered-room",
        ),
        pytest.param(
            {"settings": BreakerSettings(enabled=False), "record": held(ago(5))},
            NE,
            held(ago(5)),
            False,
            id="disabled",
        ),
    ],
)
def test_breaker_step(
    kwargs: dict[str, object], cap: Reaction, record: Record | None, withheld: bool
) -> None:
    previous = HELD_BACK if withheld else None
    result = step(previous=previous, **kwargs)  # type: ignore[arg-type]
    assert result.cap is cap
    assert result.record == record
    assert (result.withheld is not None) is withheld


def test_a_refusal_holds_the_node_back_and_reports_it() -> None:
    claim = ago(1)
    refusal = Admission(
        granted=False, decided_at=NOW, scope=CLIQUE, clique=RACK, counted=4, size=18, limit=4,
        share=0.25, window_s=600, claim=claim,
    )  # fmt: skip
    result = step(record=pending(claim), decision=refusal)
    assert result.cap is NS
    # The held record keeps the claim's time, so the refusal on the Node still answers it.
    assert result.record == held(claim, since=NOW)
    assert result.withheld is not None and result.withheld.scope == CLIQUE
    assert result.decided is not None and not result.decided.granted
    assert not result.released


def test_a_retried_claim_that_passes_is_a_release() -> None:
    claim = ago(1)
    result = step(record=pending(claim, held_since=ago(40)), decision=answer(True, claim=claim))
    assert (result.cap, result.record, result.released) == (NE, granted(), True)
    first = step(record=pending(claim), decision=answer(True, claim=claim))
    assert not first.released


def test_an_unanswered_claim_says_since_when() -> None:
    result = step(record=pending(ago(16)))
    assert result.undecided_since == ago(16)
    assert step(record=pending(ago(1))).undecided_since is None


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        (None, None),
        (pending(ago(1)), ago(-14)),  # claimed again after half the claim timeout
        (granted(ago(60)), ago(-540)),  # its window ends
        (held(ago(5)), None),  # a held node waits for the arbiter's offer
    ],
    ids=["none", "pending", "granted", "held"],
)
def test_next_change(record: Record | None, expected: datetime | None) -> None:
    assert next_change(record=record, now=NOW, settings=SETTINGS) == expected
