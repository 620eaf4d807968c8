"""Every event type this build knows, looked up by CloudEvent type, with prebuilt codecs."""

from __future__ import annotations

from typing import Final

import msgspec

from shared.events.base import Event
from shared.events.catalog import (
    CliqueCapacity,
    DomainMembershipChanged,
    NodeFault,
    NodeImexState,
    NodeRecovered,
)

AnyEvent = DomainMembershipChanged | CliqueCapacity | NodeFault | NodeRecovered | NodeImexState
"""The tagged union of every event; a payload with its ``type`` field decodes into one member."""

EVENT_TYPES: Final[tuple[type[Event], ...]] = (
    DomainMembershipChanged,
    CliqueCapacity,
    NodeFault,
    NodeRecovered,
    NodeImexState,
)

BY_CE_TYPE: Final[dict[str, type[Event]]] = {cls.ce_type(): cls for cls in EVENT_TYPES}

DECODERS: Final[dict[type[Event], msgspec.json.Decoder[Event]]] = {
    cls: msgspec.json.Decoder(cls) for cls in EVENT_TYPES
}
UNION_DECODER: Final = msgspec.json.Decoder(AnyEvent)
ENCODER: Final = msgspec.json.Encoder()


def event_class(ce_type: str) -> type[Event] | None:
    """The event class for a CloudEvent type, or None when this build does not know it."""
    return BY_CE_TYPE.get(ce_type)
