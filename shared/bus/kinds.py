"""What the bus works out once per event type: its names, its metric children, and where
each recently seen entity's events go (subject, snapshot key, the start of the header block).

Publishing a fresh event of a known entity then costs a dictionary look-up instead of building
its subjects and CloudEvents envelope again.
"""

from __future__ import annotations

import operator
from typing import Any, NamedTuple

from shared.bus import cloudevents, wire
from shared.events.base import Event

PLACES_PER_TYPE = 4096
"""Entities (per source) whose subject, snapshot key and header block start one publisher keeps
at hand."""


class Place(NamedTuple):
    """Where one entity's events go, and the start of their header block."""

    subject: str
    snapshot_key: str | None
    block_start: bytes


class Kind:
    """What the bus works out once per event type rather than per message: names, metric
    children, and the subject, snapshot key and envelope headers of recently seen entities."""

    __slots__ = (
        "_places",
        "_tokens",
        "ce_type",
        "handle_seconds",
        "published",
        "received",
        "template",
    )

    def __init__(self, cls: type[Event]) -> None:
        self.ce_type = cls.ce_type()
        self.template = cls.subject_template.template
        self.published: Any = None
        self.received: Any = None
        self.handle_seconds: Any = None
        fields = list(cls.subject_template.fields)
        if cls.snapshot_template is not None:
            fields += [f for f in cls.snapshot_template.fields if f not in fields]
        standard = (
            cls.subject is Event.subject
            and cls.ce_subject is Event.ce_subject
            and cls.snapshot_key is Event.snapshot_key
        )
        # Everything cached here derives from these fields alone, unless a type computes its
        # subjects its own way.
        self._tokens = operator.attrgetter(*fields) if fields and standard else None
        self._places: dict[object, Place] = {}

    def place(self, event: Event) -> Place:
        """Where ``event`` goes, with the start of its header block (which names its source)."""
        if self._tokens is None:
            return self._place(event)
        tokens = (self._tokens(event), event.source)
        place = self._places.get(tokens)
        if place is None:
            if len(self._places) >= PLACES_PER_TYPE:
                self._places.clear()
            place = self._places[tokens] = self._place(event)
        return place

    def _place(self, event: Event) -> Place:
        envelope = cloudevents.envelope_headers(
            ce_type=self.ce_type,
            source_header=cloudevents.header_value(event.source),
            subject_header=cloudevents.header_value(event.ce_subject()),
        )
        return Place(
            subject=event.subject(),
            snapshot_key=event.snapshot_key(),
            block_start=wire.HEADER_LINE + wire.header_lines(envelope),
        )
