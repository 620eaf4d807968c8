"""The circuit breaker's arbiter: the answers to every open claim and hold, one at a time (pure).

The arbiter is the one component that sees every Node (the clique allocator's leader). At each
evaluation :func:`arbitrate` gets the Peers as the arbiter sees them (shared/breaker/peers.py,
times on its own clock), the claims that have no answer yet in the order it first saw them, the
held nodes oldest hold first, and the places it has ``reserved`` since: grants and offers it made
that the Nodes may not show yet. It answers

- each claim: :func:`shared.breaker.admit` over the peers and the reservations, then the grant
  is reserved at once, so the next claim counts it: of the claims answered in one evaluation or
  in several, only as many pass as there are places;
- each held node without a live offer, while places are free: an offer of room (it claims
  again), reserved like a grant, so that held nodes take free places before new claims and
  never more of them than there are.

**Why concurrent faults cannot pass the cap.** There is one decider, and it counts every grant
it made from the moment it made it (a reservation), every grant it sees on a Node (a verdict
not yet acted on, a ``granted`` record for its window), and every NoExecute taint. A new leader
reads every Node from the server before it answers anything (``arbiter``), so it counts what its
predecessor granted; the predecessor's writes stop before the new leader can lead (leader
election's fencing, shared/kube/leader.py).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime

import msgspec

from shared.breaker import Admission, BreakerCaps, Peer, Verdict, admit


class Ruling(msgspec.Struct, frozen=True, kw_only=True):
    """One answer to write on a Node."""

    node: str
    verdict: Verdict
    reserves: bool  # the answer takes a place from now (a grant, an offer of room)


def arbitrate(
    *,
    peers: Mapping[str, Peer],
    claims: Sequence[tuple[str, datetime]],
    held: Sequence[tuple[str, datetime]],
    reserved: Collection[str],
    now: datetime,
    caps: BreakerCaps,
) -> list[Ruling]:
    """The answers to ``claims`` (nodes whose pending record has no answer, in the order the
    arbiter saw them) and offers of room to ``held`` nodes (without a live offer, oldest hold
    first), given the places already ``reserved``. Each node comes with its record's ``at`` as
    the node wrote it (the peers' are the arbiter's times): the answer names it."""
    taken = set(reserved)
    everyone = list(peers.values())

    def decide(name: str, claim: datetime | None = None) -> Admission | None:
        peer = peers.get(name)
        record = peer.record if peer is not None else None
        if peer is None or record is None:
            return None
        return admit(
            me=name,
            clique=peer.clique or record.clique,
            peers=everyone,
            now=now,
            caps=caps,
            claim=claim,
            reserved=taken,
        )

    rulings: list[Ruling] = []
    for name, claim in claims:
        decision = decide(name, claim)
        if decision is None:
            continue
        if decision.granted:
            taken.add(name)
        else:
            taken.discard(name)  # an offer it had is spent on this claim
        rulings.append(
            Ruling(
                node=name,
                verdict=Verdict.of(decision, claim=claim),
                reserves=decision.granted,
            )
        )
    for name, at in held:
        room = decide(name)
        if room is None or not room.granted:
            continue
        taken.add(name)
        rulings.append(
            Ruling(
                node=name,
                verdict=Verdict(claim=at, room=True, window_s=caps.window_s),
                reserves=True,
            )
        )
    return rulings
