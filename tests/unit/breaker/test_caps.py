"""The breaker's caps, table-tested: the limit of a scope and the decision on one claim."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import UTC, datetime, timedelta

import pytest

from shared.breaker import CLIQUE, CLUSTER, BreakerCaps, Peer, Record, RecordState, admit, limit

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
CAPS = BreakerCaps(clique_share=0.25, cluster_share=0.1, min_nodes=1, window_s=600)
CLIQUE_ONLY = BreakerCaps(clique_share=0.25, cluster_share=1.0)
CLUSTER_ONLY = BreakerCaps(clique_share=1.0, cluster_share=0.1)
ME = "me"
RACK = "u.1"


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def record(state: RecordState, at: datetime = NOW) -> Record:
    return Record(state=state, at=at, clique=RACK)


def rack(size: int, *, tainted: int = 0, clique: str = RACK, prefix: str = "n") -> list[Peer]:
    """``size`` monitored nodes of one clique, the first ``tainted`` of them NoExecute."""
    return [
        Peer(name=f"{prefix}{i}", clique=clique, monitored=True, no_execute=i < tainted)
        for i in range(size)
    ]


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


@pytest.mark.parametrize(
    ("peers", "clique", "caps", "reserved", "held_by"),
    [
        pytest.param(rack(17), RACK, CAPS, (), None, id="nothing-tainted"),
        pytest.param(rack(17, tainted=3), RACK, CLIQUE_ONLY, (), None, id="below-the-clique-cap"),
        pytest.param(
            rack(17, tainted=4), RACK, CLIQUE_ONLY, (), (CLIQUE, 4, 18, 4), id="clique-cap-reached"
        ),
        pytest.param(
            rack(17, tainted=3),
            RACK,
            CLIQUE_ONLY,
            ("n10",),
            (CLIQUE, 4, 18, 4),
            id="a-reserved-place-counts",
        ),
        pytest.param(
            [*rack(17, tainted=2), *rack(18, tainted=1, clique="u.2", prefix="m")],
            RACK,
            CLUSTER_ONLY,
            (),
            (CLUSTER, 3, 36, 3),
            id="cluster-cap-reached-across-cliques",
        ),
        pytest.param(
            [*rack(17, tainted=1), *rack(18, tainted=1, clique="u.2", prefix="m")],
            RACK,
            CAPS,
            (),
            None,
            id="below-both",
        ),
        pytest.param(
            [*rack(17, tainted=4), *rack(18, clique="u.2", prefix="m")],
            RACK,
            CAPS,
            (),
            (CLIQUE, 4, 18, 4),
            id="the-clique-is-checked-first",
        ),
        pytest.param(
            [Peer(name=ME, clique=RACK, monitored=True, no_execute=True), *rack(7)],
            RACK,
            CLIQUE_ONLY,
            (ME,),
            None,
            id="the-node-itself-does-not-count",
        ),
        pytest.param(
            [
                *rack(7, tainted=1),
                Peer(name="x", clique=RACK, monitored=True, record=record(RecordState.PENDING)),
            ],
            RACK,
            CLIQUE_ONLY,
            (),
            None,
            id="a-claim-without-answer-does-not-count",
        ),
        pytest.param(
            [
                *rack(7, tainted=1),
                Peer(
                    name="x",
                    clique=RACK,
                    monitored=True,
                    record=record(RecordState.PENDING),
                    granted_at=ago(1),
                ),
            ],
            RACK,
            CLIQUE_ONLY,
            (),
            (CLIQUE, 2, 9, 2),
            id="a-grant-not-acted-on-counts",
        ),
        pytest.param(
            [*rack(7, tainted=1), Peer(name="x", clique=RACK, record=record(RecordState.HELD))],
            RACK,
            CLIQUE_ONLY,
            (),
            None,
            id="a-held-node-does-not-count",
        ),
        pytest.param(
            [
                *rack(7, tainted=1),
                Peer(name="x", clique=RACK, record=record(RecordState.GRANTED, ago(60))),
            ],
            RACK,
            CLIQUE_ONLY,
            (),
            (CLIQUE, 2, 9, 2),
            id="a-recent-grant-counts-after-recovery",
        ),
        pytest.param(
            [
                *rack(7, tainted=1),
                Peer(name="x", clique=RACK, record=record(RecordState.GRANTED, ago(601))),
            ],
            RACK,
            CLIQUE_ONLY,
            (),
            None,
            id="a-grant-past-the-window-does-not",
        ),
        pytest.param(
            [*rack(9, tainted=1), Peer(name="cpu"), Peer(name="cpu2")],
            "",
            CAPS,
            (),
            (CLUSTER, 1, 10, 1),
            id="no-clique-only-the-cluster-and-only-monitored-nodes",
        ),
        pytest.param(
            rack(3),
            RACK,
            BreakerCaps(clique_share=0.1, cluster_share=0.1, min_nodes=0),
            (),
            (CLIQUE, 0, 4, 0),
            id="min-nodes-0-may-allow-none",
        ),
    ],
)
def test_admit(
    peers: Sequence[Peer],
    clique: str,
    caps: BreakerCaps,
    reserved: Collection[str],
    held_by: tuple[str, int, int, int] | None,
) -> None:
    decision = admit(
        me=ME, clique=clique, peers=peers, now=NOW, caps=caps, claim=NOW, reserved=reserved
    )
    assert decision.claim == NOW
    assert decision.granted is (held_by is None)
    if held_by is not None:
        assert (decision.scope, decision.counted, decision.size, decision.limit) == held_by


def test_describe_names_the_cap() -> None:
    decision = admit(me=ME, clique=RACK, peers=rack(17, tainted=4), now=NOW, caps=CAPS)
    assert decision.describe() == (
        "4 of 18 nodes of clique u.1 hold NoExecute or had it within 600s (cap 25%: 4)"
    )
