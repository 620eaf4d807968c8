"""cdo's events as the demo receives them: an ordered JetStream consumer on ``cdo.v1.>`` from
the moment the story starts (an earlier run's history in a reused state directory is not
counted), each message decoded and handed to a :class:`~sim.demo.tally.Tally`."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from datetime import datetime
from types import TracebackType

import msgspec
from nats.aio.msg import Msg
from nats.js.errors import NotFoundError
from opentelemetry import trace

from shared.bus import EventBus, StartAt
from shared.bus.cloudevents import decode, lowercase_headers
from shared.bus.settings import client_settings
from shared.errors import EventError
from shared.events.subjects import ALL_EVENTS
from shared.metrics import Metrics
from sim.demo.tally import Tally


class EventFeedError(Exception):
    """NATS does not answer, or has no cdo stream."""


class EventFeed:
    def __init__(
        self,
        url: str,
        *,
        tally: Tally,
        show: Callable[[str], None],
        since: datetime,
        token_file: str = "",
    ) -> None:
        settings = client_settings(url, reconnect_forever=True)
        if token_file:  # NATS identities: as the reader whose token the file holds
            settings = msgspec.structs.replace(
                settings, user="", password="", token_file=token_file
            )
        self._settings = settings
        self._tally = tally
        self._show = show
        self._since = since
        self._bus: EventBus | None = None
        self._received = asyncio.Condition()

    async def __aenter__(self) -> EventFeed:
        bus = EventBus(
            self._settings,
            service="cdo-demo",
            instance=socket.gethostname(),
            metrics=Metrics(),
            tracer=trace.get_tracer("cdo.demo"),
        )
        await bus.connect()
        self._bus = bus
        try:
            await bus.js.subscribe(
                ALL_EVENTS,
                cb=self._on_message,
                ordered_consumer=True,
                config=StartAt(time=self._since).consumer_config(),
                stream=self._settings.stream,
            )
        except NotFoundError as exc:
            await bus.close()
            raise EventFeedError(
                f"NATS at {self._settings.url} has no stream {self._settings.stream}"
            ) from exc
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._bus is not None:
            await self._bus.close()  # drops the subscription with the connection

    async def _on_message(self, msg: Msg) -> None:
        try:
            event = decode(lowercase_headers(msg.headers), msg.data)
        except EventError:
            self._tally.undecodable += 1
            return
        line = self._tally.record(event)
        if line is not None:
            self._show(line)
        async with self._received:
            self._received.notify_all()

    @property
    def tally(self) -> Tally:
        """Where the events received are counted."""
        return self._tally

    async def wait(self, check: Callable[[Tally], bool], *, timeout_s: float) -> bool:
        """Whether ``check`` holds on the tally within ``timeout_s``."""
        try:
            async with asyncio.timeout(timeout_s), self._received:
                await self._received.wait_for(lambda: check(self._tally))
        except TimeoutError:
            return False
        return True
