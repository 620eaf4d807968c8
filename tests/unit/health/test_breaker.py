"""The circuit breaker's decisions, table-tested: the caps (``admit``), one node's step
(``breaker_step``), its deadlines, and why claims decided in watch order never pass the cap."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from services.health_monitor.breaker import (
    CLIQUE,
    CLUSTER,
    Admission,
    BreakerStep,
    admit,
    breaker_step,
    limit,
    next_change,
)
from services.health_monitor.faults import Reaction
from services.health_monitor.ledger import Peer, Record, RecordState
from services.health_monitor.settings import BreakerSettings

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
SETTINGS = BreakerSettings(
    clique_share=0.25, cluster_share=0.1, min_nodes=1, window_s=600, claim_timeout_s=30
)
ME = "me"
RACK = "u.1"


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def pending(at: datetime = NOW, **kw: object) -> Record:
    return Record(state=RecordState.PENDING, at=at, clique=RACK, **kw)  # type: ignore[arg-type]


def granted(at: datetime = NOW) -> Record:
    return Record(state=RecordState.GRANTED, at=at, clique=RACK)


def held(at: datetime = NOW, since: datetime | None = None) -> Record:
    return Record(state=RecordState.HELD, at=at, clique=RACK, held_since=since or at)


def rack(size: int, *, tainted: int = 0, clique: str = RACK, prefix: str = "n") -> list[Peer]:
    """``size`` monitored nodes of one clique, the first ``tainted`` of them NoExecute."""
    return [
        Peer(name=f"{prefix}{i}", clique=clique, monitored=True, no_execute=i < tainted)
        for i in range(size)
    ]


# -- the caps -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("share", "size", "min_nodes", "expected"),
    [
        (0.25, 18, 1, 4),  # an NVL72 rack: 4 of 18
        (0.25, 8, 1, 2),
        (0.1, 36, 1, 3),  # two racks: 3 of 36
        (0.1, 5, 1, 1),  # a small cluster still handles one fault
        (0.1, 5, 0, 0),  # ... unless min_nodes is 0
        (0.3, 10, 1, 3),  # 0.3 * 10 is 2.9999... in floating point
        (1.0, 7, 1, 7),
    ],
)
def test_limit(share: float, size: int, min_nodes: int, expected: int) -> None:
    assert limit(share, size, min_nodes=min_nodes) == expected


CLIQUE_ONLY = BreakerSettings(clique_share=0.25, cluster_share=1.0)
CLUSTER_ONLY = BreakerSettings(clique_share=1.0, cluster_share=0.1)


@pytest.mark.parametrize(
    ("peers", "clique", "settings", "held_by"),
    [
        pytest.param(rack(17), RACK, SETTINGS, None, id="nothing-tainted"),
        pytest.param(rack(17, tainted=3), RACK, CLIQUE_ONLY, None, id="below-the-clique-cap"),
        pytest.param(
            rack(17, tainted=4), RACK, CLIQUE_ONLY, (CLIQUE, 4, 18, 4), id="clique-cap-reached"
        ),
        pytest.param(
            [*rack(17, tainted=2), *rack(18, tainted=1, clique="u.2", prefix="m")],
            RACK,
            CLUSTER_ONLY,
            (CLUSTER, 3, 36, 3),
            id="cluster-cap-reached-across-cliques",
        ),
        pytest.param(
            [*rack(17, tainted=1), *rack(18, tainted=1, clique="u.2", prefix="m")],
            RACK,
            SETTINGS,
            None,
            id="below-both",
        ),
        pytest.param(
            [*rack(17, tainted=4), *rack(18, clique="u.2", prefix="m")],
            RACK,
            SETTINGS,
            (CLIQUE, 4, 18, 4),
            id="the-clique-is-checked-first",
        ),
        pytest.param(
            [Peer(name=ME, clique=RACK, monitored=True, no_execute=True), *rack(7)],
            RACK,
            CLIQUE_ONLY,
            None,
            id="the-node-itself-does-not-count",
        ),
        pytest.param(
            [*rack(7, tainted=1), Peer(name="x", clique=RACK, monitored=True, record=pending())],
            RACK,
            CLIQUE_ONLY,
            (CLIQUE, 2, 9, 2),
            id="a-pending-claim-counts",
        ),
        pytest.param(
            [*rack(7, tainted=1), Peer(name="x", clique=RACK, monitored=True, record=held())],
            RACK,
            CLIQUE_ONLY,
            None,
            id="a-held-node-does-not-count",
        ),
        pytest.param(
            [*rack(7, tainted=1), Peer(name="x", clique=RACK, record=granted(ago(60)))],
            RACK,
            CLIQUE_ONLY,
            (CLIQUE, 2, 9, 2),
            id="a-recent-grant-counts-after-recovery",
        ),
        pytest.param(
            [*rack(7, tainted=1), Peer(name="x", clique=RACK, record=granted(ago(601)))],
            RACK,
            CLIQUE_ONLY,
            None,
            id="a-grant-past-the-window-does-not",
        ),
        pytest.param(
            [*rack(9, tainted=1), Peer(name="cpu"), Peer(name="cpu2")],
            "",
            SETTINGS,
            (CLUSTER, 1, 10, 1),
            id="no-clique-only-the-cluster-and-only-monitored-nodes",
        ),
        pytest.param(
            rack(3),
            RACK,
            BreakerSettings(clique_share=0.1, cluster_share=0.1, min_nodes=0),
            (CLIQUE, 0, 4, 0),
            id="min-nodes-0-may-allow-none",
        ),
    ],
)
def test_admit(
    peers: Sequence[Peer],
    clique: str,
    settings: BreakerSettings,
    held_by: tuple[str, int, int, int] | None,
) -> None:
    decision = admit(me=ME, clique=clique, peers=peers, now=NOW, settings=settings, claim=NOW)
    assert decision.claim == NOW
    assert decision.granted is (held_by is None)
    if held_by is not None:
        assert (decision.scope, decision.counted, decision.size, decision.limit) == held_by


def test_describe_names_the_cap() -> None:
    decision = admit(me=ME, clique=RACK, peers=rack(17, tainted=4), now=NOW, settings=SETTINGS)
    assert decision.describe(window_s=600) == (
        "4 of 18 nodes of clique u.1 hold NoExecute, claim it or had it within 600s (cap 25%: 4)"
    )


@pytest.mark.parametrize("tainted", range(6))
@pytest.mark.parametrize("seed", range(20))
def test_claims_decided_in_watch_order_never_pass_the_cap(tainted: int, seed: int) -> None:
    """Every other node of an 18-node rack claims at once. Each monitor decides its own claim
    when its watch delivers it, so it sees every claim before it in resourceVersion order,
    each either still pending or already decided (granted counts, held does not), and none
    after it. Whatever the mix, exactly the first ``cap - tainted`` claims pass."""
    draw = random.Random(seed)
    base = rack(18, tainted=tainted)
    earlier: list[Peer] = []  # the claims before the current one, as the watch delivered them
    passed = 0
    for claimant in base[tainted:]:
        names = {peer.name for peer in earlier}
        seen = [peer for peer in base if peer.name not in names] + earlier
        decision = admit(me=claimant.name, clique=RACK, peers=seen, now=NOW, settings=CLIQUE_ONLY)
        passed += decision.granted
        # What later claimants see of this one: still its claim, or already its decision.
        record = pending() if draw.random() < 0.5 else granted() if decision.granted else held()
        earlier.append(Peer(name=claimant.name, clique=RACK, monitored=True, record=record))
    assert passed == max(0, 4 - tainted)


# -- one node's step ------------------------------------------------------------------------

HELD_BACK = Admission(
    granted=False, decided_at=NOW, scope=CLIQUE, clique=RACK, counted=4, size=18, limit=4,
    share=0.25,
)  # fmt: skip
NE, NS, NONE = Reaction.NO_EXECUTE, Reaction.NO_SCHEDULE, Reaction.NONE


def verdict(ok: bool, *, claim: datetime, decided_at: datetime = NOW) -> Admission:
    return Admission(granted=ok, decided_at=decided_at, claim=claim, clique=RACK)


def step(
    *,
    wants: Reaction = NE,
    raw: Reaction = NE,
    current: Reaction = NONE,
    record: Record | None = None,
    decision: Admission | None = None,
    previous: Admission | None = None,
    peers: Sequence[Peer] = (),
    settings: BreakerSettings = SETTINGS,
) -> BreakerStep:
    return breaker_step(
        wants=wants,
        raw=raw,
        current=current,
        record=record,
        verdict=decision,
        previous=previous,
        me=ME,
        clique=RACK,
        peers=peers,
        now=NOW,
        settings=settings,
    )


@pytest.mark.parametrize(
    ("kwargs", "cap", "record", "withheld"),
    [
        pytest.param({"wants": NONE, "raw": NONE}, NE, None, False, id="healthy"),
        pytest.param({"wants": NS, "raw": NS}, NE, None, False, id="degraded-needs-no-claim"),
        # While a claim is decided the taint stays as it is: none straight to NoExecute.
        pytest.param({}, NONE, pending(), False, id="fatal-claims-leaving-the-taint"),
        pytest.param(
            {"current": NS}, NS, pending(), False, id="escalation-claims-keeping-noschedule"
        ),
        pytest.param(
            {"record": pending(ago(1))}, NONE, pending(ago(1)), False, id="claim-waits-for-verdict"
        ),
        pytest.param(
            {"record": pending(ago(1)), "decision": verdict(True, claim=ago(1))},
            NE,
            granted(),
            False,
            id="granted",
        ),
        pytest.param(
            {"record": pending(ago(1)), "decision": verdict(True, claim=ago(9))},
            NONE,
            pending(ago(1)),
            False,
            id="a-verdict-for-another-claim-is-ignored",
        ),
        pytest.param(
            {"record": pending(ago(16))}, NONE, pending(), False, id="undecided-claim-is-retried"
        ),
        pytest.param(
            {
                "record": pending(ago(20)),
                "decision": verdict(True, claim=ago(20), decided_at=ago(1)),
            },
            NONE,
            pending(),
            False,
            id="a-late-decision-is-not-trusted",
        ),
        pytest.param({"current": NE}, NE, None, False, id="already-tainted-keeps-it"),
        pytest.param(
            {"current": NE, "record": pending(ago(1))},
            NE,
            granted(),
            False,
            id="tainted-after-restart-turns-its-claim-into-a-grant",
        ),
        pytest.param(
            {"record": granted(ago(60))}, NE, granted(ago(60)), False, id="fresh-grant-reused"
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
                "decision": verdict(True, claim=ago(1)),
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
            id="an-undecided-claim-is-not-retried-once-the-fault-is-gone",
        ),
        pytest.param(
            {"current": NS, "record": held(ago(5)), "peers": rack(17, tainted=4)},
            NS,
            held(ago(5)),
            True,
            id="held-while-there-is-no-room",
        ),
        pytest.param(
            {
                "current": NS,
                "record": held(ago(5), since=ago(50)),
                "peers": rack(17, tainted=3),
                "settings": CLIQUE_ONLY,
            },
            NS,
            pending(held_since=ago(50)),
            True,
            id="held-claims-again-when-there-is-room",
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


def test_a_held_verdict_holds_the_node_back_and_reports_it() -> None:
    claim = ago(1)
    result = step(record=pending(claim), decision=msgspec.structs.replace(HELD_BACK, claim=claim))
    assert result.cap is NS
    assert result.record == held(NOW)
    assert result.withheld is not None and result.withheld.scope == CLIQUE
    assert result.decided is not None and not result.decided.granted
    assert not result.released


def test_a_retried_claim_that_passes_is_a_release() -> None:
    claim = ago(1)
    result = step(record=pending(claim, held_since=ago(40)), decision=verdict(True, claim=claim))
    assert (result.cap, result.record, result.released) == (NE, granted(), True)
    first = step(record=pending(claim), decision=verdict(True, claim=claim))
    assert not first.released


# -- deadlines ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("record", "peers", "expected"),
    [
        (None, (), None),
        (pending(ago(1)), (), ago(-14)),  # retried after half the claim timeout
        (granted(ago(60)), (), ago(-540)),  # its window ends
        (
            held(ago(5)),
            [
                Peer(name="a", no_execute=True),
                Peer(name="b", record=granted(ago(590))),
                Peer(name="c", record=pending(ago(1))),
            ],
            ago(-10),  # b stops counting first
        ),
        (held(ago(5)), [Peer(name="a", no_execute=True)], None),  # only a taint's end helps
    ],
    ids=["none", "pending", "granted", "held", "held-behind-taints"],
)
def test_next_change(
    record: Record | None, peers: Sequence[Peer], expected: datetime | None
) -> None:
    assert next_change(record=record, peers=peers, now=NOW, settings=SETTINGS) == expected
