"""The circuit breaker on NoExecute taints: pure decisions over the ledger (``ledger``).

A fatal fault asks for the NoExecute taint, which evicts the node's workloads. The breaker
lets at most ``clique_share`` of a clique's nodes and ``cluster_share`` of the cluster's
monitored nodes (each at least ``min_nodes``) hold it at once, where a node *holds* it while
it carries the taint, while it claims it, and for ``window_s`` after it was granted. Past the
cap the node only reports: NoSchedule, the condition, an Event.

Two pure functions:

- :func:`admit` decides one claim from the Peers a monitor sees;
- :func:`breaker_step` moves one node's record on at every evaluation and says how strong its
  taint may be (``cap``) and whether the breaker holds its NoExecute back (``withheld``).

**Why two monitors deciding at once cannot both pass the cap.** A node claims NoExecute by
writing a ``pending`` record on its own Node; its monitor decides the claim (:func:`admit`) in
its Node informer's handler, at the moment the watch delivers that write. A watch delivers one
resource's changes in resourceVersion order, so at that moment the monitor has seen every
change committed before its claim, and no later one. Of two claims, the later one therefore
always sees the earlier (pending or decided) and counts it: in each scope only the first
``limit - already counted`` claims in resourceVersion order can pass. No overshoot, no
coordinator, no shared object; a claim that is decided from a relist (the informer lost its
watch) sees later claims too, which only makes it stricter.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

import msgspec

from services.health_monitor.faults import Reaction
from services.health_monitor.ledger import Peer, Record, RecordState, counts, expires_at
from services.health_monitor.settings import BreakerSettings

CLIQUE = "clique"
CLUSTER = "cluster"


def limit(share: float, size: int, *, min_nodes: int) -> int:
    """The most nodes of a scope of ``size`` nodes that may hold NoExecute."""
    return max(min_nodes, math.floor(share * size + 1e-9))


class Admission(msgspec.Struct, frozen=True, kw_only=True):
    """One decision of the breaker, and the scope that decided it."""

    granted: bool
    decided_at: datetime
    scope: str = ""  # CLIQUE or CLUSTER: the scope whose cap holds the node back
    clique: str = ""
    counted: int = 0  # nodes of the scope, this one aside, that hold NoExecute
    size: int = 0  # nodes in the scope, this one included
    limit: int = 0
    share: float = 0.0
    claim: datetime | None = None  # the pending record this decides (its ``at``)

    def describe(self, *, window_s: float) -> str:
        """The cap in words, for the condition and the Event."""
        where = f"clique {self.clique}" if self.scope == CLIQUE else "the cluster"
        return (
            f"{self.counted} of {self.size} nodes of {where} hold NoExecute, claim it or had it "
            f"within {window_s:g}s (cap {self.share:.0%}: {self.limit})"
        )


def admit(
    *,
    me: str,
    clique: str,
    peers: Iterable[Peer],
    now: datetime,
    settings: BreakerSettings,
    claim: datetime | None = None,
) -> Admission:
    """May ``me`` (of ``clique``; "" for none) take NoExecute, given the other nodes' state?

    The node itself is not counted against the caps, but is part of each scope's size.
    """
    others = [peer for peer in peers if peer.name != me]
    scopes: list[tuple[str, float, list[Peer]]] = []
    if clique:
        scopes.append(
            (CLIQUE, settings.clique_share, [peer for peer in others if peer.clique == clique])
        )
    scopes.append((CLUSTER, settings.cluster_share, [peer for peer in others if peer.monitored]))
    for scope, share, members in scopes:
        size = len(members) + 1
        cap = limit(share, size, min_nodes=settings.min_nodes)
        counted = sum(1 for peer in members if counts(peer, now=now, settings=settings))
        if counted >= cap:
            return Admission(
                granted=False,
                decided_at=now,
                scope=scope,
                clique=clique,
                counted=counted,
                size=size,
                limit=cap,
                share=share,
                claim=claim,
            )
    return Admission(granted=True, decided_at=now, clique=clique, claim=claim)


class BreakerStep(msgspec.Struct, frozen=True, kw_only=True):
    """What one evaluation of the breaker asks of the node."""

    cap: Reaction  # the strongest taint the node may carry now
    record: Record | None  # the record the Node should carry (None: no annotation)
    withheld: Admission | None = None  # the breaker holds this node's NoExecute back
    decided: Admission | None = None  # a claim's decision this step acted on
    released: bool = False  # NoExecute granted to a node the breaker had held back


def _fresh_grant(record: Record | None, *, now: datetime, settings: BreakerSettings) -> bool:
    return (
        record is not None
        and record.state is RecordState.GRANTED
        and now - record.at < timedelta(seconds=settings.window_s)
    )


def _waiting(current: Reaction) -> Reaction:
    """The cap while a claim is decided (milliseconds): the taint stays as it is, so a node
    goes from no taint straight to NoExecute; a held-back node keeps its NoSchedule."""
    return min(current, Reaction.NO_SCHEDULE)


def _claim(
    *,
    now: datetime,
    clique: str,
    current: Reaction,
    held_since: datetime | None,
    previous: Admission | None,
) -> BreakerStep:
    record = Record(state=RecordState.PENDING, at=now, clique=clique, held_since=held_since)
    # A retried claim keeps reporting the hold until it is decided, so the condition and the
    # Events do not flap while it is.
    return BreakerStep(
        cap=_waiting(current), record=record, withheld=previous if held_since else None
    )


def breaker_step(
    *,
    wants: Reaction,
    raw: Reaction,
    current: Reaction,
    record: Record | None,
    verdict: Admission | None,
    previous: Admission | None,
    me: str,
    clique: str,
    peers: Sequence[Peer],
    now: datetime,
    settings: BreakerSettings,
) -> BreakerStep:
    """The breaker's step for the node ``me`` at ``now``.

    ``wants`` is the reaction the node should show (faults and hold-down), ``raw`` what its
    active faults alone ask for, ``current`` the fault taint it carries now, ``record`` its
    record as last seen, ``verdict`` the decision on its pending record if its informer has
    seen it (:func:`admit`), ``previous`` the hold the last step reported, ``peers`` the other
    nodes as the informer shows them now.
    """
    if not settings.enabled:
        return BreakerStep(cap=Reaction.NO_EXECUTE, record=record)
    if wants < Reaction.NO_EXECUTE:
        # Nothing to claim: a claim or hold is dropped, a grant counts out its window.
        keep = record if _fresh_grant(record, now=now, settings=settings) else None
        return BreakerStep(cap=Reaction.NO_EXECUTE, record=keep)
    if current is Reaction.NO_EXECUTE or _fresh_grant(record, now=now, settings=settings):
        return _holding(record, now=now, clique=clique)
    first_claim = (
        record is not None and record.state is RecordState.PENDING and record.held_since is None
    )
    if raw < Reaction.NO_EXECUTE and not first_claim:
        # The fault is gone, only the hold-down asks for NoExecute: nothing new is claimed and a
        # node held back is not evicted now. (A first claim in flight is still decided: without
        # the breaker the node would carry NoExecute for the hold-down.)
        return BreakerStep(cap=Reaction.NO_SCHEDULE, record=None)
    if record is not None and record.state is RecordState.PENDING:
        return _pending(
            record,
            verdict=verdict,
            previous=previous,
            raw=raw,
            current=current,
            clique=clique,
            now=now,
            settings=settings,
        )
    if record is not None and record.state is RecordState.HELD:
        return _held(
            record,
            previous=previous,
            current=current,
            me=me,
            clique=clique,
            peers=peers,
            now=now,
            settings=settings,
        )
    return _claim(now=now, clique=clique, current=current, held_since=None, previous=None)


def _holding(record: Record | None, *, now: datetime, clique: str) -> BreakerStep:
    """The node holds NoExecute already: it is counted, keeping it adds nobody."""
    if record is not None and record.state is not RecordState.GRANTED:
        record = Record(state=RecordState.GRANTED, at=now, clique=record.clique or clique)
    return BreakerStep(cap=Reaction.NO_EXECUTE, record=record)


def _decision(verdict: Admission, record: Record, *, now: datetime) -> BreakerStep:
    """Act on the timely decision of the pending ``record``: NoExecute, or held back."""
    if verdict.granted:
        granted = Record(state=RecordState.GRANTED, at=now, clique=record.clique)
        return BreakerStep(
            cap=Reaction.NO_EXECUTE,
            record=granted,
            decided=verdict,
            released=record.held_since is not None,
        )
    held = Record(
        state=RecordState.HELD, at=now, clique=record.clique, held_since=record.held_since or now
    )
    return BreakerStep(cap=Reaction.NO_SCHEDULE, record=held, withheld=verdict, decided=verdict)


def _pending(
    record: Record,
    *,
    verdict: Admission | None,
    previous: Admission | None,
    raw: Reaction,
    current: Reaction,
    clique: str,
    now: datetime,
    settings: BreakerSettings,
) -> BreakerStep:
    """The node's claim is pending: act on its decision, claim again, or wait for it."""
    half = timedelta(seconds=settings.claim_timeout_s / 2)
    decided = verdict is not None and verdict.claim == record.at
    if verdict is not None and decided and verdict.decided_at - record.at <= half:
        return _decision(verdict, record, now=now)
    if decided or now - record.at > half:
        # Undecided for too long, or decided too late (others may have stopped counting
        # it): claim again, if the fault still asks for it.
        if raw < Reaction.NO_EXECUTE:
            return BreakerStep(cap=Reaction.NO_SCHEDULE, record=None)
        return _claim(
            now=now, clique=clique, current=current, held_since=record.held_since, previous=previous
        )
    return BreakerStep(
        cap=_waiting(current), record=record, withheld=previous if record.held_since else None
    )


def _held(
    record: Record,
    *,
    previous: Admission | None,
    current: Reaction,
    me: str,
    clique: str,
    peers: Sequence[Peer],
    now: datetime,
    settings: BreakerSettings,
) -> BreakerStep:
    """The node is held back: claim again once there is room, else keep reporting the hold."""
    room = admit(me=me, clique=record.clique or clique, peers=peers, now=now, settings=settings)
    if room.granted:
        return _claim(
            now=now,
            clique=clique,
            current=current,
            held_since=record.held_since or record.at,
            previous=previous,
        )
    return BreakerStep(cap=Reaction.NO_SCHEDULE, record=record, withheld=room)


def next_change(
    *, record: Record | None, peers: Iterable[Peer], now: datetime, settings: BreakerSettings
) -> datetime | None:
    """The next moment the breaker's step can change by time alone: a claim to retry, a grant
    whose window ends, or (while held back) another node that stops counting."""
    moments: list[datetime] = []
    if record is not None:
        if record.state is RecordState.PENDING:
            moments.append(record.at + timedelta(seconds=settings.claim_timeout_s / 2))
        elif record.state is RecordState.GRANTED:
            moments.append(record.at + timedelta(seconds=settings.window_s))
        else:
            moments.extend(
                moment
                for peer in peers
                if (moment := expires_at(peer, now=now, settings=settings)) is not None
            )
    later = [moment for moment in moments if moment > now]
    return min(later) if later else None
