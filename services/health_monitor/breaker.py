"""The circuit breaker, the claimant's side: one node's record moved on at every evaluation (pure).

The caps (shared/breaker) are decided by one arbiter, the clique allocator's leader, which sees
every Node; a node's monitor sees only its own Node. :func:`breaker_step` says how strong the
node's taint may be now (``cap``), which record its Node should carry, and whether the breaker
holds its NoExecute back (``withheld``):

- a node that needs NoExecute and does not hold it writes a ``pending`` record (a claim),
  leaving its taint as it is, and waits for the arbiter's verdict on its Node;
- a grant seen within ``claim_timeout_s / 2`` of the claim (on this node's clock, which wrote
  the claim) is acted on: NoExecute and a ``granted`` record, kept for the window the verdict
  names; a refusal makes the record ``held``, with NoSchedule;
- an answer later than that, or none, makes the node claim again, and from then on it carries
  NoSchedule and says that no decision came (the arbiter may be down: NoSchedule is the safe
  side, and the condition says so);
- a held node claims again when the arbiter offers it room (a ``room`` verdict on its held
  record).

**Why a late answer is not acted on.** The arbiter counts a grant against the caps from the
moment it makes it, for at least twice ``decide_within_s`` (shared/breaker/peers.py). The claim
is written before the arbiter decides, and the node acts no later than ``decide_within_s``
after writing it, so it acts within that time of the grant, while the grant still counts; its
taint then counts by itself.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import msgspec

from services.health_monitor.faults import Reaction
from services.health_monitor.settings import BreakerSettings
from shared.breaker import Admission, Record, RecordState


class BreakerStep(msgspec.Struct, frozen=True, kw_only=True):
    """What one evaluation of the breaker asks of the node."""

    cap: Reaction  # the strongest taint the node may carry now
    record: Record | None  # the record the Node should carry (None: no annotation)
    withheld: Admission | None = None  # the breaker holds this node's NoExecute back
    decided: Admission | None = None  # a claim's decision this step acted on
    released: bool = False  # NoExecute granted to a node the breaker had held back
    undecided_since: datetime | None = None  # claims made since then got no timely answer


def _fresh_grant(record: Record | None, *, now: datetime) -> bool:
    return (
        record is not None
        and record.state is RecordState.GRANTED
        and now - record.at < timedelta(seconds=record.window_s)
    )


def _waiting(current: Reaction, record: Record) -> Reaction:
    """The cap while a claim waits for its answer. The first claim of a fault leaves the taint
    as it is (an answer takes milliseconds), so a node goes from no taint straight to
    NoExecute; a node held back, or whose earlier claim got no answer, carries NoSchedule."""
    if record.held_since is not None or record.waiting_since is not None:
        return Reaction.NO_SCHEDULE
    return min(current, Reaction.NO_SCHEDULE)


def _claim(
    *,
    now: datetime,
    clique: str,
    current: Reaction,
    settings: BreakerSettings,
    held_since: datetime | None = None,
    waiting_since: datetime | None = None,
    previous: Admission | None = None,
) -> BreakerStep:
    record = Record(
        state=RecordState.PENDING,
        at=now,
        clique=clique,
        held_since=held_since,
        waiting_since=waiting_since,
        decide_within_s=settings.claim_timeout_s / 2,
    )
    # A retried claim keeps reporting the hold until it is decided, so the condition and the
    # Events do not flap while it is.
    return BreakerStep(
        cap=_waiting(current, record),
        record=record,
        withheld=previous if held_since else None,
        undecided_since=waiting_since,
    )


def breaker_step(
    *,
    wants: Reaction,
    raw: Reaction,
    current: Reaction,
    record: Record | None,
    verdict: Admission | None,
    room: bool,
    previous: Admission | None,
    clique: str,
    now: datetime,
    settings: BreakerSettings,
) -> BreakerStep:
    """The breaker's step for the node at ``now`` (its own clock).

    ``wants`` is the reaction the node should show (faults and hold-down), ``raw`` what its
    active faults alone ask for, ``current`` the fault taint it carries now, ``record`` its
    record as last seen, ``verdict`` the arbiter's answer to its pending record as this monitor
    read it (``decided_at``: when it first saw it), ``room`` whether the arbiter offers room to
    its held record, ``previous`` the hold the last step reported.
    """
    if not settings.enabled:
        return BreakerStep(cap=Reaction.NO_EXECUTE, record=record)
    if wants < Reaction.NO_EXECUTE:
        # Nothing to claim: a claim or hold is dropped, a grant counts out its window.
        keep = record if _fresh_grant(record, now=now) else None
        return BreakerStep(cap=Reaction.NO_EXECUTE, record=keep)
    if current is Reaction.NO_EXECUTE or _fresh_grant(record, now=now):
        return _holding(record, now=now, clique=clique)
    first_claim = (
        record is not None
        and record.state is RecordState.PENDING
        and record.held_since is None
        and record.waiting_since is None
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
        if room:
            return _claim(
                now=now,
                clique=clique,
                current=current,
                settings=settings,
                held_since=record.held_since or record.at,
                previous=previous,
            )
        return BreakerStep(cap=Reaction.NO_SCHEDULE, record=record, withheld=previous)
    return _claim(now=now, clique=clique, current=current, settings=settings)


def _holding(record: Record | None, *, now: datetime, clique: str) -> BreakerStep:
    """The node holds NoExecute already: it is counted, keeping it adds nobody."""
    if record is not None and record.state is not RecordState.GRANTED:
        record = Record(state=RecordState.GRANTED, at=now, clique=record.clique or clique)
    return BreakerStep(cap=Reaction.NO_EXECUTE, record=record)


def _decision(verdict: Admission, record: Record, *, now: datetime) -> BreakerStep:
    """Act on the timely answer to the pending ``record``: NoExecute, or held back."""
    if verdict.granted:
        granted = Record(
            state=RecordState.GRANTED, at=now, clique=record.clique, window_s=verdict.window_s
        )
        return BreakerStep(
            cap=Reaction.NO_EXECUTE,
            record=granted,
            decided=verdict,
            released=record.held_since is not None,
        )
    # The held record keeps the claim's ``at``: the refusal on the Node still answers it.
    held = Record(
        state=RecordState.HELD,
        at=record.at,
        clique=record.clique,
        held_since=record.held_since or now,
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
    """The node's claim is pending: act on its answer, claim again, or wait for it."""
    within = timedelta(seconds=record.decide_within_s or settings.claim_timeout_s / 2)
    decided = verdict is not None and verdict.claim == record.at
    if verdict is not None and decided and verdict.decided_at - record.at <= within:
        return _decision(verdict, record, now=now)
    if decided or now - record.at >= within:
        # No answer in time, or one too late to act on: claim again, if the fault still asks
        # for it; from now on the node carries NoSchedule and says it waits for an answer.
        if raw < Reaction.NO_EXECUTE:
            return BreakerStep(cap=Reaction.NO_SCHEDULE, record=None)
        return _claim(
            now=now,
            clique=clique,
            current=current,
            settings=settings,
            held_since=record.held_since,
            waiting_since=record.waiting_since or (record.at if not record.held_since else None),
            previous=previous,
        )
    return BreakerStep(
        cap=_waiting(current, record),
        record=record,
        withheld=previous if record.held_since else None,
        undecided_since=record.waiting_since,
    )


def next_change(
    *, record: Record | None, now: datetime, settings: BreakerSettings
) -> datetime | None:
    """The next moment the breaker's step can change by time alone: a claim to make again, or
    a grant whose window ends. (A held node waits for the arbiter's offer of room.)"""
    moment: datetime | None = None
    if record is not None and record.state is RecordState.PENDING:
        within = record.decide_within_s or settings.claim_timeout_s / 2
        moment = record.at + timedelta(seconds=within)
    elif record is not None and record.state is RecordState.GRANTED:
        moment = record.at + timedelta(seconds=record.window_s)
    return moment if moment is not None and moment > now else None
