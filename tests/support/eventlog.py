"""The events of one type an observer's bus receives, in arrival order, and their KV snapshots.

Harnesses subscribe one before the service under test starts, then read what it published:
``of(key)`` every event about one entity (a clique, a domain), ``latest(key)`` the newest, and
``snapshot(key)`` the entity's current state in the snapshot bucket.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, Self, TypeVar

from shared.bus import EventBus
from shared.events import Event

E = TypeVar("E", bound=Event)


class EventLog(Generic[E]):
    def __init__(
        self,
        bus: EventBus,
        *,
        kind: type[E],
        subject: str,
        key: Callable[[E], str],
        snapshot_key: Callable[[str], str],
    ) -> None:
        """``subject`` is the wildcard subscribed; ``key`` names an event's entity and
        ``snapshot_key`` that entity's key in the snapshot bucket."""
        self.bus = bus
        self.events: list[E] = []
        self._kind = kind
        self._subject = subject
        self._key = key
        self._snapshot_key = snapshot_key

    async def start(self) -> Self:
        async def on_event(event: Event) -> None:
            if isinstance(event, self._kind):
                self.events.append(event)

        await self.bus.subscribe(self._subject, on_event)
        # The subscription reaches the server before anything the test does next publishes.
        await self.bus.nc.flush()
        return self

    def of(self, key: str) -> list[E]:
        return [event for event in self.events if self._key(event) == key]

    def latest(self, key: str) -> E | None:
        found = self.of(key)
        return found[-1] if found else None

    async def snapshot(self, key: str) -> E | None:
        for event in await self.bus.snapshots(self._snapshot_key(key)):
            if isinstance(event, self._kind):
                return event
        return None
