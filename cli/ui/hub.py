"""The page's state in the server, and its changes sent to every open page.

Informer changes and feed events mark the state dirty; :meth:`Hub.run` recomputes it at most
every :data:`COALESCE_S` (a burst of changes is drawn once) and sends each open page only what
changed: the racks whose drawing differs (compared as their encoded JSON), the legend, the
status; feed lines go out as they arrive. A page that connects gets the whole state first. A page
that cannot keep up (its queue full) is disconnected, and the browser's EventSource reconnects
and gets the whole state again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

import msgspec

from cli.ui.feed import FeedEntry, SourceStatus
from cli.ui.health import FeedFaults
from cli.ui.view import Page
from shared.events import DomainMembershipChanged, Event

COALESCE_S = 0.05
TICK_S = 1.0
"""How often the status and the feed's fault marks are looked at without a change."""
QUEUE_SIZE = 256
_encode = msgspec.json.Encoder().encode


class Status(msgspec.Struct, frozen=True, kw_only=True):
    api: SourceStatus
    feed: SourceStatus
    note: str = ""
    synced: bool = False
    nodes: int = 0
    gpus: int = 0


def sse(event: str, data: bytes) -> bytes:
    """One Server-Sent Event (the JSON is one line)."""
    return b"event: " + event.encode() + b"\ndata: " + data + b"\n\n"


class Hub:
    """Computes the page and fans its changes out (module docstring)."""

    def __init__(
        self,
        compute: Callable[[FeedFaults], Page],
        status: Callable[[], Status],
        recent: Callable[[], list[FeedEntry]],
    ) -> None:
        self._compute = compute
        self._status = status
        self._recent = recent
        self.feed_faults = FeedFaults()
        self._dirty = asyncio.Event()
        self._clients: set[asyncio.Queue[bytes | None]] = set()
        self._racks: dict[str, bytes] = {}
        self._order: list[str] = []
        self._legend = b"[]"
        self._status_sent = b""
        self._changed_domains: set[str] = set()
        self.computed = asyncio.Event()
        """Set once the page was computed from synced caches."""

    # -- inputs ---------------------------------------------------------------------------------

    def mark(self, kind: str, key: str) -> None:
        """An informer's change (``kind`` node|domain|placement|status)."""
        if kind in ("domain", "placement") and key:
            self._changed_domains.add(key)
        self._dirty.set()

    def on_feed(self, event: Event, entry: FeedEntry | None) -> None:
        if self.feed_faults.apply(event, now=time.time()):
            self._dirty.set()
        if isinstance(event, DomainMembershipChanged):
            self._changed_domains.add(f"{event.namespace}/{event.name}")
            self._dirty.set()
        if entry is not None:
            self._broadcast(sse("feed", _encode(entry)))

    # -- outputs --------------------------------------------------------------------------------

    def subscribe(self) -> asyncio.Queue[bytes | None]:
        """A queue of what a new page gets: the whole state, then the changes."""
        queue: asyncio.Queue[bytes | None] = asyncio.Queue(QUEUE_SIZE)
        queue.put_nowait(sse("snapshot", self.snapshot()))
        self._clients.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[bytes | None]) -> None:
        self._clients.discard(queue)

    def snapshot(self) -> bytes:
        """The whole state as last computed (computed now if it never was)."""
        if not self._status_sent:
            self.refresh()
        racks = b",".join(self._racks[rack] for rack in self._order)
        feed = _encode(self._recent())
        return (
            b'{"racks":[' + racks + b'],"legend":' + self._legend
            + b',"status":' + self._status_sent
            + b',"feed":' + feed + b"}"
        )  # fmt: skip

    def _broadcast(self, message: bytes) -> None:
        for queue in list(self._clients):
            try:
                queue.put_nowait(message)
            except asyncio.QueueFull:
                # Too slow to follow: dropped; its browser reconnects and gets a snapshot.
                self._clients.discard(queue)
                with contextlib.suppress(asyncio.QueueFull):
                    queue.get_nowait()
                    queue.put_nowait(None)

    # -- the loop -------------------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._dirty.wait(), TICK_S)
            if self._dirty.is_set():
                await asyncio.sleep(COALESCE_S)
                self._dirty.clear()
            self.feed_faults.expire(now=time.time())
            self.refresh()

    def refresh(self) -> None:
        """Compute the page and send what changed since the last time."""
        status = self._status()
        drawn = self._compute(self.feed_faults)
        status = msgspec.structs.replace(
            status,
            nodes=sum(1 for r in drawn.racks for b in r.blocks for t in b.trays if t is not None),
            gpus=sum(len(t.gpus) for r in drawn.racks for b in r.blocks for t in b.trays if t),
        )
        racks = {rack.id: _encode(rack) for rack in drawn.racks}
        order = [rack.id for rack in drawn.racks]
        changed = [racks[rid] for rid in order if self._racks.get(rid) != racks[rid]]
        if changed or order != self._order:
            message = b'{"racks":[' + b",".join(changed) + b'],"order":' + _encode(order) + b"}"
            self._racks, self._order = racks, order
            self._broadcast(sse("racks", message))
        legend = _encode(drawn.legend)
        if legend != self._legend:
            self._legend = legend
            self._broadcast(sse("legend", legend))
        encoded = _encode(status)
        if encoded != self._status_sent:
            self._status_sent = encoded
            self._broadcast(sse("status", encoded))
        if self._changed_domains:
            keys, self._changed_domains = sorted(self._changed_domains), set()
            self._broadcast(sse("changed", _encode(keys)))
        if status.synced:
            self.computed.set()
