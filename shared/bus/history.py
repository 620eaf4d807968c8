"""Reading the bus's history: where a stream consumer starts, what it delivers, and the latest
value of each snapshot key.

The JetStream stream keeps the replayable event history (:mod:`shared.bus.jetstream`); the KV
bucket keeps the newest snapshot per key (:mod:`shared.bus.snapshots` writes it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from nats.js import api
from nats.js.kv import KeyValue

from shared.events.base import Event


@dataclass(frozen=True, slots=True)
class Delivery:
    """An event read from the JetStream history, with its place in the stream."""

    event: Event
    subject: str
    stream_sequence: int


DeliveryHandler = Callable[[Delivery], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class StartAt:
    """Where a stream consumer starts: at a sequence, at a time, at the end, or (default) at
    the beginning of the retained history."""

    sequence: int | None = None
    time: datetime | None = None
    new_only: bool = False

    def consumer_config(self) -> api.ConsumerConfig:
        if self.sequence is not None:
            return api.ConsumerConfig(
                deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=self.sequence
            )
        if self.time is not None:
            return api.ConsumerConfig(
                deliver_policy=api.DeliverPolicy.BY_START_TIME,
                opt_start_time=self.time,
            )
        if self.new_only:
            return api.ConsumerConfig(deliver_policy=api.DeliverPolicy.NEW)
        return api.ConsumerConfig(deliver_policy=api.DeliverPolicy.ALL)


async def latest_values(kv: KeyValue, keys: str) -> AsyncIterator[bytes]:
    """The current value of every key of ``kv`` matching ``keys``, then stop."""
    watcher = await kv.watch(keys, ignore_deletes=True)
    try:
        while True:
            entry = await watcher.updates(timeout=5.0)  # type: ignore[no-untyped-call]
            if entry is None:  # end of the current values
                return
            if entry.value:
                yield entry.value
    finally:
        await watcher.stop()  # type: ignore[no-untyped-call]
