"""cdo's event contract: typed, versioned events and the subjects they travel on."""

from shared.events.base import Event, new_event_id
from shared.events.catalog import (
    CliqueCapacity,
    DomainMember,
    DomainMembershipChanged,
    DomainSlice,
    ImexPeer,
    NodeCapacity,
    NodeFault,
    NodeImexState,
    NodeRecovered,
)
from shared.events.registry import EVENT_TYPES, AnyEvent, event_class

__all__ = [
    "EVENT_TYPES",
    "AnyEvent",
    "CliqueCapacity",
    "DomainMember",
    "DomainMembershipChanged",
    "DomainSlice",
    "Event",
    "ImexPeer",
    "NodeCapacity",
    "NodeFault",
    "NodeImexState",
    "NodeRecovered",
    "event_class",
    "new_event_id",
]
