"""The circuit breaker's shared state: what each Node says about its NoExecute taint.

The monitors run one per node with no coordinator, and a node's services write only their own
Node, so the breaker keeps its state on the Nodes themselves, where every monitor reads it
from its Node informer:

- the ``cdo.dev/gpu-fault`` taint with effect NoExecute: the node holds NoExecute now;
- the annotation ``cdo.dev/gpu-fault-breaker`` (:class:`Record`, JSON), written by the node's
  own monitor in the same write as its taint: ``pending`` (a claim for NoExecute, decided by
  the claimant when its informer sees it, see ``breaker``), ``granted`` (NoExecute allowed;
  kept for ``window_s`` after the grant, so a node that recovered keeps counting for the
  window) or ``held`` (withheld by the breaker; counts for nothing).

:func:`peer_of` reduces one Node to the few facts the breaker counts (:class:`Peer`);
:func:`counts` says whether a peer takes one of the caps' places now. Times are wall-clock
(UTC), since they are compared across nodes.
"""

from __future__ import annotations

import enum
from datetime import datetime, timedelta

import msgspec

from services.health_monitor.faults import Reaction
from services.health_monitor.settings import BreakerSettings
from shared.crds.names import (
    BREAKER_ANNOTATION,
    CLIQUE_LABEL,
    GPU_FAULT_TAINT,
    GPU_HEALTHY_CONDITION,
)
from shared.kube.models import Node


class RecordState(enum.StrEnum):
    PENDING = "pending"  # claims NoExecute; counts until decided (or claim_timeout_s)
    GRANTED = "granted"  # NoExecute allowed; counts for window_s after ``at``
    HELD = "held"  # withheld by the breaker; counts for nothing


class Record(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The breaker's record on one Node."""

    state: RecordState
    at: datetime  # when this state began (a pending claim's identity)
    clique: str = ""  # the node's clique when written, so it counts there without its label
    held_since: datetime | None = None  # a retried claim of a node the breaker held back


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(Record)


def encode_record(record: Record) -> str:
    return _ENCODER.encode(record).decode()


def decode_record(text: str | None) -> Record | None:
    """The record an annotation holds; None when absent or unreadable (it then counts for
    nothing, as if the node had no record)."""
    if not text:
        return None
    try:
        record = _DECODER.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return record if record.at.tzinfo is not None else None


class Peer(msgspec.Struct, frozen=True, kw_only=True):
    """What the breaker needs of one Node."""

    name: str
    clique: str = ""  # the clique label, else the record's clique, else ""
    monitored: bool = False  # a health monitor runs there (it has the GpuHealthy condition)
    no_execute: bool = False  # it carries the fault taint with NoExecute
    record: Record | None = None


def fault_reaction(node: Node) -> Reaction:
    """The fault taint the Node carries now."""
    effects = {taint.effect for taint in node.spec.taints if taint.key == GPU_FAULT_TAINT}
    if "NoExecute" in effects:
        return Reaction.NO_EXECUTE
    return Reaction.NO_SCHEDULE if "NoSchedule" in effects else Reaction.NONE


def peer_of(node: Node) -> Peer:
    record = decode_record(node.metadata.annotations.get(BREAKER_ANNOTATION))
    clique = node.metadata.labels.get(CLIQUE_LABEL) or (record.clique if record else "")
    no_execute = fault_reaction(node) is Reaction.NO_EXECUTE
    return Peer(
        name=node.metadata.name,
        clique=clique,
        monitored=node.condition(GPU_HEALTHY_CONDITION) is not None
        or no_execute
        or record is not None,
        no_execute=no_execute,
        record=record,
    )


def _age_s(moment: datetime, now: datetime) -> float:
    return (now - moment).total_seconds()


def counts(peer: Peer, *, now: datetime, settings: BreakerSettings) -> bool:
    """True while ``peer`` takes a place under the caps: it carries NoExecute, claims it (for
    at most ``claim_timeout_s``), or was granted it less than ``window_s`` ago."""
    if peer.no_execute:
        return True
    record = peer.record
    if record is None:
        return False
    if record.state is RecordState.PENDING:
        return _age_s(record.at, now) < settings.claim_timeout_s
    if record.state is RecordState.GRANTED:
        return _age_s(record.at, now) < settings.window_s
    return False


def expires_at(peer: Peer, *, now: datetime, settings: BreakerSettings) -> datetime | None:
    """When ``peer`` stops counting by time alone (None: never by time, or not counting)."""
    record = peer.record
    if peer.no_execute or record is None or not counts(peer, now=now, settings=settings):
        return None
    if record.state is RecordState.PENDING:
        return record.at + timedelta(seconds=settings.claim_timeout_s)
    return record.at + timedelta(seconds=settings.window_s)
