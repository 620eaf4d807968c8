"""The circuit breaker's arbiter (pure): claims answered one at a time never pass the cap, in
one evaluation or over many, whatever the Nodes show meanwhile; held nodes are offered the
free places, oldest hold first, before new claims take them."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from services.clique_allocator.breaker import arbitrate
from shared.breaker import BreakerCaps, Peer, Record, RecordState

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
RACK = "u.1"
CLIQUE_ONLY = BreakerCaps(clique_share=0.25, cluster_share=1.0)  # 4 of 18
CLUSTER_ONLY = BreakerCaps(clique_share=1.0, cluster_share=0.1)  # 3 of 36


def peer(
    name: str,
    *,
    clique: str = RACK,
    no_execute: bool = False,
    state: RecordState | None = None,
    since: datetime = NOW,
) -> Peer:
    record = (
        None
        if state is None
        else Record(
            state=state, at=NOW, clique=clique, held_since=since if state == "held" else None
        )
    )
    return Peer(name=name, clique=clique, monitored=True, no_execute=no_execute, record=record)


@pytest.mark.parametrize("tainted", range(6))
@pytest.mark.parametrize("seed", range(20))
def test_claims_answered_over_many_evaluations_never_pass_the_cap(tainted: int, seed: int) -> None:
    """Every other node of an 18-node rack claims at once. The arbiter answers the claims it has
    seen in random batches; a grant shows on its Node (a NoExecute taint) some evaluations later,
    or never. Exactly ``cap - tainted`` claims pass, and never more hold a place at once."""
    draw = random.Random(seed)
    peers = {f"n{i}": peer(f"n{i}", no_execute=i < tainted) for i in range(18)}
    waiting = [name for name in peers if not peers[name].no_execute]
    draw.shuffle(waiting)
    reserved: set[str] = set()  # the arbiter's grants, counted from the moment it made them
    granted: set[str] = set()
    while waiting:
        batch, waiting = (
            waiting[: draw.randint(1, 4)],
            waiting[draw.randint(1, 4) :] if False else waiting,
        )
        batch = waiting[: draw.randint(1, len(waiting))]
        waiting = waiting[len(batch) :]
        for name in batch:
            peers[name] = peer(name, state=RecordState.PENDING)
        rulings = arbitrate(
            peers=peers,
            claims=[(name, NOW) for name in batch],
            held=[],
            reserved=reserved,
            now=NOW,
            caps=CLIQUE_ONLY,
        )
        assert [ruling.node for ruling in rulings] == batch
        for ruling in rulings:
            if ruling.verdict.granted:
                reserved.add(ruling.node)
                granted.add(ruling.node)
            else:
                peers[ruling.node] = peer(ruling.node, state=RecordState.HELD)
        # Some grants show on their Nodes now: the taint counts by itself.
        for name in granted:
            if draw.random() < 0.5:
                peers[name] = peer(name, no_execute=True, state=RecordState.GRANTED)
        holding = {name for name, p in peers.items() if p.no_execute} | reserved
        assert len(holding) <= max(4, tainted)  # more were tainted before any claim
    assert len(granted) == max(0, 4 - tainted)


def test_the_cluster_cap_counts_every_clique() -> None:
    peers = {f"a{i}": peer(f"a{i}") for i in range(18)} | {
        f"b{i}": peer(f"b{i}", clique="u.2") for i in range(18)
    }
    claims = ["a0", "b0", "a1", "b1", "a2"]
    for name in claims:
        peers[name] = peer(name, clique=peers[name].clique, state=RecordState.PENDING)
    rulings = arbitrate(
        peers=peers,
        claims=[(name, NOW) for name in claims],
        held=[],
        reserved=(),
        now=NOW,
        caps=CLUSTER_ONLY,
    )
    assert [r.verdict.granted for r in rulings] == [True, True, True, False, False]
    refused = rulings[-1].verdict
    assert (refused.scope, refused.counted, refused.size, refused.limit) == ("cluster", 3, 36, 3)


def test_held_nodes_are_offered_the_free_places_oldest_first() -> None:
    early, late = datetime(2025, 6, 1, 11, 0, tzinfo=UTC), datetime(2025, 6, 1, 11, 30, tzinfo=UTC)
    peers = {f"n{i}": peer(f"n{i}") for i in range(18)}
    peers["n0"] = peer("n0", no_execute=True)
    peers["n1"] = peer("n1", no_execute=True)
    peers["h-late"] = peer("h-late", state=RecordState.HELD, since=late)
    peers["h-early"] = peer("h-early", state=RecordState.HELD, since=early)
    peers["h-third"] = peer("h-third", state=RecordState.HELD, since=late)
    peers["c"] = peer("c", state=RecordState.PENDING)
    # 21 nodes: the cap is 5; two hold it, one place is reserved, two are free: the new claim
    # takes one, the oldest hold gets an offer of the other, the rest wait.
    rulings = arbitrate(
        peers=peers,
        claims=[("c", NOW)],
        held=[("h-early", early), ("h-late", NOW), ("h-third", NOW)],
        reserved={"n2"},
        now=NOW,
        caps=CLIQUE_ONLY,
    )
    assert [(r.node, r.verdict.granted, r.verdict.room) for r in rulings] == [
        ("c", True, False),
        ("h-early", False, True),
    ]
    assert rulings[1].verdict.claim == early  # it answers the held record as the node wrote it
    # The offered node's claim, next time, is not held back by its own offer.
    peers["h-early"] = peer("h-early", state=RecordState.PENDING)
    again = arbitrate(
        peers=peers,
        claims=[("h-early", NOW)],
        held=[("h-late", NOW), ("h-third", NOW)],
        reserved={"n2", "c", "h-early"},
        now=NOW,
        caps=CLIQUE_ONLY,
    )
    assert [(r.node, r.verdict.granted, r.verdict.room) for r in again] == [
        ("h-early", True, False)
    ]
