"""A node's circuit breaker record: what its health monitor says about NoExecute on its Node.

The annotation ``cdo.dev/gpu-fault-breaker`` (:class:`Record`, JSON), written by the node's own
monitor in the same write as its taint:

- ``pending``: a claim for NoExecute, which the arbiter (the clique allocator's leader) answers
  with a verdict (``verdict``); the claimant acts on the answer only within
  ``decide_within_s`` of ``at`` on its own clock, else claims again;
- ``granted``: NoExecute allowed; kept for ``window_s`` after the grant, so a node that
  recovered keeps counting for the window;
- ``held``: refused by the arbiter; counts for nothing, and waits for the arbiter to say there
  is room.

``at`` is the claimant's own clock: the arbiter never compares it with its own (``peers``).
"""

from __future__ import annotations

import enum
from datetime import datetime

import msgspec


class RecordState(enum.StrEnum):
    PENDING = "pending"  # claims NoExecute; the arbiter answers it
    GRANTED = "granted"  # NoExecute allowed; counts for the window after ``at``
    HELD = "held"  # refused; counts for nothing


class Record(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The breaker's record on one Node."""

    state: RecordState
    at: datetime  # when this state began, on the node's clock (a claim's identity)
    clique: str = ""  # the node's clique when written, so it counts there without its label
    held_since: datetime | None = None  # a retried claim of a node the breaker held back
    waiting_since: datetime | None = None  # a retried claim that got no timely answer
    decide_within_s: float = 0.0  # (pending) an answer seen later than this is not acted on
    window_s: float = 0.0  # (granted) how long the grant counts, as the arbiter said


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
