"""Domain membership events, and the ledger that makes each real change publish exactly once.

A membership event is published when what it says changes: phase, reason, clique, channel,
size, members, slices or generation; never for a mere re-reconcile. ``clique`` and ``channel``
are set only for a domain in one clique; ``slices`` says where each slice of the gang is, and
every member names its clique. The ledger remembers, per domain,
what was last published. A new leader fills it from the KV snapshots (the last event of every
domain) before it reconciles anything, so a change that was written to the status but not yet
published when the previous leader died is published now, and one already published is not
published again. (If a leader dies after publishing but before its snapshot reached the bucket,
the next leader publishes that state once more: at least once across crashes, exactly once
otherwise.)
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

import msgspec

from services.domain_controller.status import Assessment
from shared.events import DomainMembershipChanged, Event
from shared.kube.keys import ObjectKey

DELETED = "Deleted"
"""Phase of the last event of a domain: it is gone, with everything it held."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def membership_event(
    key: ObjectKey, *, uid: str, generation: int, assessment: Assessment
) -> DomainMembershipChanged:
    status = assessment.status
    return DomainMembershipChanged(
        namespace=key.namespace,
        name=key.name,
        uid=uid,
        generation=generation,
        phase=assessment.phase,
        clique=status.clique or "",
        channel=status.channel,
        size=assessment.size,
        members=assessment.members,
        slices=assessment.slices,
        reason=assessment.reason,
    )


def final_event(key: ObjectKey, *, uid: str, generation: int) -> DomainMembershipChanged:
    return DomainMembershipChanged(
        namespace=key.namespace,
        name=key.name,
        uid=uid,
        generation=generation,
        phase=DELETED,
        reason=DELETED,
    )


def content(event: DomainMembershipChanged) -> bytes:
    """The event without its identity (id, time, source): equal content, same change."""
    anonymous = msgspec.structs.replace(event, id="", time=_EPOCH, source="")
    return msgspec.json.encode(anonymous)


class Published(msgspec.Struct, frozen=True, kw_only=True):
    uid: str
    phase: str
    content: bytes


class Ledger:
    """What was last published per domain (``namespace/name``)."""

    def __init__(self) -> None:
        self._entries: dict[ObjectKey, Published] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def load(self, events: Iterable[Event]) -> None:
        """Start from the snapshots in the KV bucket."""
        for event in events:
            if isinstance(event, DomainMembershipChanged):
                self.record(ObjectKey(namespace=event.namespace, name=event.name), event)

    def get(self, key: ObjectKey) -> Published | None:
        return self._entries.get(key)

    def changed(self, key: ObjectKey, event: DomainMembershipChanged) -> bool:
        entry = self._entries.get(key)
        return entry is None or entry.content != content(event)

    def record(self, key: ObjectKey, event: DomainMembershipChanged) -> None:
        self._entries[key] = Published(uid=event.uid, phase=event.phase, content=content(event))

    def forget(self, key: ObjectKey) -> None:
        self._entries.pop(key, None)

    def domains(self) -> list[ObjectKey]:
        return list(self._entries)
