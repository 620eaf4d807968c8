"""The base every cdo event derives from, and the identity every event carries."""

from __future__ import annotations

import itertools
import secrets
from datetime import UTC, datetime
from typing import Annotated, ClassVar

import msgspec
from msgspec import Meta

from shared.events.subjects import SubjectTemplate

# An id is a random per-process prefix plus a counter: unique across processes and restarts,
# and far cheaper than a uuid4 per event on the publish path.
_ID_PREFIX = secrets.token_hex(8)
_ID_COUNTER = itertools.count(1)


def new_event_id() -> str:
    """A new CloudEvent id, unique for every event this process creates."""
    return f"{_ID_PREFIX}-{next(_ID_COUNTER)}"


def utc_now() -> datetime:
    return datetime.now(UTC)


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """An immutable cdo event. Subclasses set ``tag=`` to their CloudEvent type.

    The payload on the wire is the whole Struct, so it is self-describing (``type``, ``id``,
    ``time``, ``source`` included) even where no headers travel, as in KV snapshots. In binary
    mode the same attributes travel as ``ce-*`` headers, which win when both are present.
    """

    subject_template: ClassVar[SubjectTemplate]
    """Where events of this type are published."""
    snapshot_template: ClassVar[SubjectTemplate | None] = None
    """KV key of the latest-state snapshot this event updates, if any."""

    id: Annotated[str, Meta(description="CloudEvent id, unique per source.")] = msgspec.field(
        default_factory=new_event_id
    )
    time: Annotated[
        datetime,
        Meta(
            description="When the event occurred (RFC 3339, UTC).",
            extra_json_schema={"format": "date-time"},
        ),
    ] = msgspec.field(default_factory=utc_now)
    source: Annotated[str, Meta(description="CloudEvent source: cdo/<service>/<instance>.")] = ""

    @classmethod
    def ce_type(cls) -> str:
        """The CloudEvent type, which is also the tag of this Struct in the union."""
        tag = cls.__struct_config__.tag
        assert isinstance(tag, str), f"{cls.__name__} has no string tag"
        return tag

    def subject(self) -> str:
        """The NATS subject of this event."""
        return self.subject_template.render_for(self)

    def ce_subject(self) -> str:
        """The CloudEvent subject: the entity the event is about, e.g. ``default/domain-1``."""
        return "/".join(str(getattr(self, name)) for name in self.subject_template.fields)

    def snapshot_key(self) -> str | None:
        """The KV key this event's payload is stored under as the latest state, if any."""
        template = self.snapshot_template
        return None if template is None else template.render_for(self)
