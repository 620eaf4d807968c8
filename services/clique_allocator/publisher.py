"""Publishes CliqueCapacity events when a clique's capacity changes (leader only).

Anything that may change capacity pokes the publisher; it waits ``interval_s`` so a burst of
placements turns into one event per clique with the final state, computes every clique's
capacity from the current view, and publishes those that differ from what was last published.
The ledger starts from the KV snapshots, so a new leader publishes only real changes; it is
loaded again each time the bus connects, so a bucket that missed events (or lost its store) is
brought up to date with the capacity computed from Kubernetes.
"""

from __future__ import annotations

import asyncio
import logging

from services.clique_allocator.capacity import CapacityLedger, capacity_events
from services.clique_allocator.state import ClusterState
from shared.bus import EventBus
from shared.errors import BusUnavailableError
from shared.events import CliqueCapacity
from shared.events.subjects import CLIQUE_SNAPSHOT

log = logging.getLogger("cdo.clique_allocator.capacity")


class CapacityPublisher:
    def __init__(self, *, bus: EventBus, state: ClusterState, interval_s: float) -> None:
        self._bus = bus
        self._state = state
        self._interval_s = interval_s
        self._wake = asyncio.Event()
        self.ledger = CapacityLedger()
        self.published = 0
        self.latest: dict[str, CliqueCapacity] = {}
        """What this replica last published per clique (a clique that is gone, none)."""

    def poke(self) -> None:
        """Capacity may have changed."""
        self._wake.set()

    async def load(self) -> bool:
        """Start the ledger from the bucket's snapshots; False (and the ledger as it was)
        while NATS is down."""
        try:
            snapshots = list(await self._bus.snapshots(CLIQUE_SNAPSHOT.wildcard()))
        except BusUnavailableError:
            log.warning("NATS is down: publishing capacity without the snapshots")
            return False
        self.ledger.load(snapshots)
        self.latest = {
            event.clique: event
            for event in snapshots
            if isinstance(event, CliqueCapacity) and event.nodes_total
        }
        return True

    async def publish_changes(self) -> int:
        facts = self._state.facts()
        events = capacity_events(self._state.view(), facts)
        changed = self.ledger.changes(events)
        for event in changed:
            await self._bus.publish(event)
            self.ledger.record(event)
            if event.nodes_total:
                self.latest[event.clique] = event
            else:
                self.latest.pop(event.clique, None)
        self.published += len(changed)
        return len(changed)

    async def run(self) -> None:
        """Publish on every poke, until cancelled."""
        self.poke()
        while True:
            await self._wake.wait()
            if self._interval_s > 0:
                await asyncio.sleep(self._interval_s)
            self._wake.clear()
            count = await self.publish_changes()
            if count:
                log.debug("published clique capacity", extra={"cliques": count})
