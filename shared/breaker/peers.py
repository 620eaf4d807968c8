"""What the arbiter counts of each Node: its taint, its record and the verdict it was given.

:func:`peer_of` reduces one Node to the few facts the breaker counts (:class:`Peer`);
:func:`counts` says whether a peer takes one of the caps' places now. A peer holds a place
while it carries the ``cdo.dev/gpu-fault`` NoExecute taint, for ``window_s`` after a
``granted`` record, and while a verdict granting its pending claim may still be acted on
(:func:`grant_hold_s`).

Times in a Peer are the arbiter's: the shell that builds them (the clique allocator's breaker)
replaces every stamp another node wrote by the moment it first saw that stamp, on its own
clock (shared/sightings.py), so ``now - at`` is a duration on one clock whatever the skew.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import msgspec

from shared.breaker.record import Record, RecordState, decode_record
from shared.breaker.settings import BreakerCaps
from shared.breaker.verdict import Verdict, decode_verdict
from shared.crds.names import (
    BREAKER_ANNOTATION,
    BREAKER_VERDICT_ANNOTATION,
    CLIQUE_LABEL,
    GPU_FAULT_TAINT,
    GPU_HEALTHY_CONDITION,
)
from shared.kube.models import Node


class Peer(msgspec.Struct, frozen=True, kw_only=True):
    """What the breaker needs of one Node."""

    name: str
    clique: str = ""  # the clique label, else the record's clique, else ""
    monitored: bool = False  # a health monitor runs there (it has the GpuHealthy condition)
    no_execute: bool = False  # it carries the fault taint with NoExecute
    record: Record | None = None
    verdict: Verdict | None = None  # the arbiter's answer, when it answers this record
    stale_verdict: bool = False  # a verdict that answers no open record (to be removed)
    granted_at: datetime | None = None  # when a verdict granting the pending claim was seen


def carries_no_execute(node: Node) -> bool:
    return any(
        taint.key == GPU_FAULT_TAINT and taint.effect == "NoExecute" for taint in node.spec.taints
    )


def peer_of(node: Node) -> Peer:
    annotations = node.metadata.annotations
    record = decode_record(annotations.get(BREAKER_ANNOTATION))
    text = annotations.get(BREAKER_VERDICT_ANNOTATION)
    verdict = decode_verdict(text)
    if record is None or verdict is None or verdict.claim != record.at:
        verdict = None  # it answers another record
    acted_on = record is not None and record.state is RecordState.GRANTED
    stale = text is not None and (verdict is None or acted_on)
    clique = node.metadata.labels.get(CLIQUE_LABEL) or (record.clique if record else "")
    no_execute = carries_no_execute(node)
    pending_grant = (
        record is not None
        and record.state is RecordState.PENDING
        and verdict is not None
        and verdict.granted
    )
    return Peer(
        name=node.metadata.name,
        clique=clique,
        monitored=node.condition(GPU_HEALTHY_CONDITION) is not None
        or no_execute
        or record is not None,
        no_execute=no_execute,
        record=record,
        verdict=verdict,
        stale_verdict=stale,
        granted_at=record.at if pending_grant and record is not None else None,
    )


def grant_hold_s(record: Record | None, caps: BreakerCaps) -> float:
    """How long a grant counts before the node has acted on it: at least the claim timeout,
    and twice the time the claimant said it acts within (it acts, if at all, within that time
    after the grant was made, and its taint then counts by itself)."""
    within = record.decide_within_s if record is not None else 0.0
    return max(caps.claim_timeout_s, 2 * within)


def _age_s(moment: datetime, now: datetime) -> float:
    return (now - moment).total_seconds()


def counts(peer: Peer, *, now: datetime, caps: BreakerCaps) -> bool:
    """True while ``peer`` takes a place under the caps (the module docstring)."""
    if peer.no_execute:
        return True
    if peer.granted_at is not None and _age_s(peer.granted_at, now) < grant_hold_s(
        peer.record, caps
    ):
        return True
    record = peer.record
    return (
        record is not None
        and record.state is RecordState.GRANTED
        and _age_s(record.at, now) < caps.window_s
    )


def expires_at(peer: Peer, *, now: datetime, caps: BreakerCaps) -> datetime | None:
    """When ``peer`` stops counting by time alone (None: never by time, or not counting)."""
    if peer.no_execute or not counts(peer, now=now, caps=caps):
        return None
    moments: list[datetime] = []
    if peer.granted_at is not None:
        moments.append(peer.granted_at + timedelta(seconds=grant_hold_s(peer.record, caps)))
    record = peer.record
    if record is not None and record.state is RecordState.GRANTED:
        moments.append(record.at + timedelta(seconds=caps.window_s))
    later = [moment for moment in moments if moment > now]
    return max(later) if later else None
