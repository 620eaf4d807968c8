"""The arbiter's answer to a node's breaker record, on that node's Node.

The annotation ``cdo.dev/gpu-fault-breaker-verdict`` (:class:`Verdict`, JSON) is written only by
the clique allocator's leader. It answers the record whose ``at`` it names in ``claim``:

- to a ``pending`` record: ``granted`` (the node may take NoExecute; ``window_s`` says how long
  the grant counts) or refused, with the cap that refused it;
- to a ``held`` record: ``room`` (a place is free now: claim again).

A verdict that names another ``at`` than the node's record answers an earlier record and means
nothing now.
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from shared.breaker.admission import Admission


class Verdict(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The arbiter's answer to one record."""

    claim: datetime  # the ``at`` of the record answered
    granted: bool = False
    room: bool = False  # (to a held record) there is room now: claim again
    window_s: float = 0.0
    # The cap that refused the claim (for the node's condition and Event).
    scope: str = ""
    clique: str = ""
    counted: int = 0
    size: int = 0
    limit: int = 0
    share: float = 0.0

    @classmethod
    def of(cls, admission: Admission, *, claim: datetime) -> Verdict:
        return cls(
            claim=claim,
            granted=admission.granted,
            window_s=admission.window_s,
            scope=admission.scope,
            clique=admission.clique,
            counted=admission.counted,
            size=admission.size,
            limit=admission.limit,
            share=admission.share,
        )

    def admission(self, *, seen_at: datetime) -> Admission:
        """The decision as the claimant reads it, ``seen_at`` when it first saw it (its own
        clock: the only one it compares with its claim's ``at``)."""
        return Admission(
            granted=self.granted,
            decided_at=seen_at,
            scope=self.scope,
            clique=self.clique,
            counted=self.counted,
            size=self.size,
            limit=self.limit,
            share=self.share,
            window_s=self.window_s,
            claim=self.claim,
        )


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(Verdict)


def encode_verdict(verdict: Verdict) -> str:
    return _ENCODER.encode(verdict).decode()


def decode_verdict(text: str | None) -> Verdict | None:
    """The verdict an annotation holds; None when absent or unreadable."""
    if not text:
        return None
    try:
        verdict = _DECODER.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return verdict if verdict.claim.tzinfo is not None else None
