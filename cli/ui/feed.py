"""The live event feed: cdo's CloudEvents from NATS, as lines of the page's feed.

:class:`LiveFeed` follows the JetStream stream with an ordered consumer: on each connection it
starts after the last event it saw (the first time, :data:`HISTORY_S` back), so a page opened late
still shows what just happened, and a reconnection misses nothing the stream kept. NATS is
optional: while it does not answer (or has no cdo stream yet) the feed says so in
:attr:`LiveFeed.status` and the page keeps drawing from the Kubernetes API.

:func:`feed_entry` (pure) keeps the fault, recovery, membership and capacity events and says
each in one line (:func:`shared.events.describe.describe`).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import msgspec
from nats import errors as nats_errors
from nats.aio.subscription import Subscription
from opentelemetry import trace

from cli.connection import Endpoints, nats_settings
from shared.bus import EventBus, StartAt
from shared.bus.history import Delivery
from shared.events import CliqueCapacity, DomainMembershipChanged, Event, NodeFault, NodeRecovered
from shared.events.describe import describe
from shared.events.subjects import ALL_EVENTS
from shared.metrics import Metrics

HISTORY_S = 600.0
"""How far back the first connection reads the stream."""
KEPT = 200
"""Feed lines kept for a page that opens."""
_TYPE_PREFIX = "dev.cdo.v1."


class FeedEntry(msgspec.Struct, frozen=True, kw_only=True):
    sequence: int
    time: str
    kind: str
    """fault | recovered | membership | capacity"""
    summary: str
    node: str = ""
    domain: str = ""
    """``namespace/name`` of a membership event."""
    severity: str = ""


class SourceStatus(msgspec.Struct, frozen=True, kw_only=True):
    up: bool
    message: str


def feed_entry(event: Event, sequence: int) -> FeedEntry | None:
    """The feed line of an event the page shows; None for the others (IMEX state)."""
    if isinstance(event, NodeFault):
        kind, node, domain, severity = "fault", event.node, "", event.severity
    elif isinstance(event, NodeRecovered):
        kind, node, domain, severity = "recovered", event.node, "", ""
    elif isinstance(event, DomainMembershipChanged):
        kind, node, domain, severity = "membership", "", f"{event.namespace}/{event.name}", ""
    elif isinstance(event, CliqueCapacity):
        kind, node, domain, severity = "capacity", "", "", ""
    else:
        return None
    return FeedEntry(
        sequence=sequence,
        time=event.time.astimezone(UTC).strftime("%H:%M:%S"),
        kind=kind,
        summary=describe(event),
        node=node,
        domain=domain,
        severity=severity,
    )


OnEvent = Callable[[Event, FeedEntry | None], None]


class LiveFeed:
    """Follows the stream (module docstring); ``on_event`` gets every decoded event."""

    def __init__(self, endpoints: Endpoints, on_event: OnEvent) -> None:
        self._endpoints = endpoints
        self._on_event = on_event
        self._settings = nats_settings(endpoints.nats_url, reconnect_forever=True)
        self._bus = EventBus(
            self._settings,
            service="cdo-ui",
            instance=socket.gethostname(),
            metrics=Metrics(),
            tracer=trace.get_tracer("cdo-ui"),
        )
        self._last = 0
        self._consumer: Subscription | None = None
        self.recent: deque[FeedEntry] = deque(maxlen=KEPT)

    @property
    def status(self) -> SourceStatus:
        url = self._endpoints.nats_url
        if self._bus.feed_up and self._consumer is not None:
            return SourceStatus(up=True, message=f"live: NATS at {url}")
        if self._bus.is_connected:
            return SourceStatus(
                up=False,
                message=f"the live feed is down: NATS at {url} answers but has no cdo event "
                f"stream {self._settings.stream} yet",
            )
        return SourceStatus(
            up=False,
            message=f"the live feed is down: NATS at {url} (from {self._endpoints.nats_url_from}) "
            "does not answer; the page shows the state from the Kubernetes API",
        )

    async def run(self) -> None:
        self._bus.when_connected("ui feed", self._follow)
        try:
            await self._bus.run()
        finally:
            await self._bus.close()

    async def _follow(self) -> None:
        old, self._consumer = self._consumer, None
        if old is not None:
            with contextlib.suppress(nats_errors.Error, asyncio.TimeoutError):
                await old.unsubscribe()
        start = (
            StartAt(sequence=self._last + 1)
            if self._last
            else StartAt(time=datetime.now(UTC) - timedelta(seconds=HISTORY_S))
        )
        self._consumer = await self._bus.consume(self._deliver, subject=ALL_EVENTS, start=start)

    async def _deliver(self, delivery: Delivery) -> None:
        if delivery.stream_sequence <= self._last:
            return
        self._last = delivery.stream_sequence
        entry = feed_entry(delivery.event, delivery.stream_sequence)
        if entry is not None:
            self.recent.append(entry)
        self._on_event(delivery.event, entry)
