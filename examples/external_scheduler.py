"""An external scheduler's view of cdo: current state first, then every change, exactly once.

    python examples/external_scheduler.py [--nats-url nats://127.0.0.1:4222]

A scheduler that places work on NVLink cliques (a Kueue, Volcano, KAI or Slurm-style one) needs
cdo's current picture (free capacity per clique, domains and their members, node faults, IMEX
state per node) and then each change as it happens. This program keeps that picture and prints
what it does as JSON lines on stdout:

1. **Where the stream is.** It asks the ``CDO`` stream for its last sequence number.
2. **Current state.** It reads every snapshot from the ``cdo-snapshots`` KV bucket: the latest
   event per clique, domain and node aspect ({"kind": "snapshot"}).
3. **Changes, from there on.** It follows the stream with an ordered consumer from just after
   that sequence, or from ``--overlap-s`` earlier (a snapshot is written a moment after its
   event; the overlap catches one that had not landed yet). Every message carries its stream
   sequence; the program remembers the last one it handled ({"kind": "event"}).
4. **Exactly once.** An event whose CloudEvent id it has applied already, or that is older than
   what it holds for the same entity, changes nothing ({"kind": "skipped"}): that is how the
   overlap, a producer's re-send, and a redelivery after a reconnect are absorbed.
5. **NATS restarts.** When the connection comes back it subscribes again from the sequence
   after the last one handled ({"kind": "resumed"}). If the stream lost history it never
   delivered (trimmed by age or size, or recreated empty), it reloads the snapshots
   ({"kind": "resync"}) before it goes on.

It imports only ``shared`` (cdo's event types, for decoding) and nats-py. Other languages use the
contract in proto/ (proto/asyncapi.yaml and one JSON Schema per event) the same way;
docs/events.md walks through it. Stop it with Ctrl-C or SIGTERM (exit 0).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext, api

from shared.bus.cloudevents import decode, lowercase_headers
from shared.errors import EventError
from shared.events import Event
from shared.events.describe import describe
from shared.events.registry import UNION_DECODER
from shared.events.subjects import ALL_EVENTS

log = logging.getLogger("external-scheduler")

STREAM = "CDO"
BUCKET = "cdo-snapshots"
_REMEMBERED_IDS = 100_000
_RECONNECTED = object()
_STOP = object()


def emit(kind: str, **fields: Any) -> None:
    """One JSON line on stdout: what the scheduler did."""
    sys.stdout.write(json.dumps({"kind": kind, **fields}, default=str) + "\n")
    sys.stdout.flush()


# -- the scheduler's picture ------------------------------------------------------------------


class View:
    """The latest event per entity (its snapshot key), and the ids already applied."""

    def __init__(self) -> None:
        self.latest: dict[str, Event] = {}
        self._applied: OrderedDict[str, None] = OrderedDict()

    def _remember(self, event_id: str) -> None:
        self._applied[event_id] = None
        if len(self._applied) > _REMEMBERED_IDS:
            self._applied.popitem(last=False)

    def apply(self, event: Event) -> str | None:
        """Take ``event`` in; None if it changed the picture, else why it did not."""
        if event.id in self._applied:
            return "duplicate"
        key = event.snapshot_key() or event.id
        held = self.latest.get(key)
        # One producer owns an entity, so its events' times are in publishing order.
        if held is not None and event.time < held.time:
            return "stale"
        self.latest[key] = event
        self._remember(event.id)
        return None


def summary(event: Event) -> dict[str, Any]:
    return {
        "id": event.id,
        "type": event.ce_type(),
        "key": event.snapshot_key(),
        "time": event.time.isoformat(),
        "summary": describe(event),
    }


# -- following the stream ---------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    nats_url: str
    subject: str
    overlap_s: float
    heartbeat_s: float


class Follower:
    """Keeps a :class:`View` in step with cdo's events; see the module docstring."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.view = View()
        self.last_sequence = 0
        """The stream sequence of the last message handled (0: none yet)."""
        self._start: api.ConsumerConfig | None = None
        # Messages, and markers for a reconnect or a stop, in the order they happened.
        self._queue: asyncio.Queue[Msg | object] = asyncio.Queue()
        self._subscription: Subscription | None = None
        self._nc: Client | None = None

    @property
    def js(self) -> JetStreamContext:
        assert self._nc is not None
        return self._nc.jetstream()

    async def connect(self) -> None:
        async def reconnected() -> None:
            log.info("NATS connection back")
            self._queue.put_nowait(_RECONNECTED)

        async def disconnected() -> None:
            log.info("NATS connection lost; reconnecting")

        async def error(exc: Exception) -> None:
            log.debug("NATS: %s", exc)

        self._nc = await nats.connect(
            self.options.nats_url,
            name="external-scheduler",
            max_reconnect_attempts=-1,  # a scheduler outlives any NATS restart
            reconnect_time_wait=0.5,
            reconnected_cb=reconnected,
            disconnected_cb=disconnected,
            error_cb=error,
        )

    async def close(self) -> None:
        await self._unsubscribe()
        if self._nc is not None and not self._nc.is_closed:
            await self._nc.close()

    # -- 1. and 2.: the stream's position, then the snapshots ---------------------------------

    async def load_snapshots(self, *, kind: str) -> int:
        """Apply every snapshot in the bucket; how many changed the picture."""
        kv = await self.js.key_value(BUCKET)
        watcher = await kv.watchall(ignore_deletes=True)
        applied = 0
        try:
            while (entry := await watcher.updates(timeout=10.0)) is not None:  # type: ignore[no-untyped-call]
                if not entry.value:
                    continue
                try:
                    event = UNION_DECODER.decode(entry.value)
                except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                    log.warning("snapshot %s does not decode: %s", entry.key, exc)
                    continue
                if self.view.apply(event) is None:
                    applied += 1
                    emit(kind, **summary(event))
        finally:
            await watcher.stop()  # type: ignore[no-untyped-call]
        return applied

    async def bootstrap(self) -> api.ConsumerConfig:
        """Steps 1 and 2; the consumer that follows on without a gap."""
        info = await self.js.stream_info(STREAM)
        position = info.state.last_seq
        read_at = datetime.now(UTC)
        snapshots = await self.load_snapshots(kind="snapshot")
        emit("ready", stream_sequence=position, snapshots=snapshots)
        if self.options.overlap_s <= 0:
            return _from_sequence(position + 1)
        return api.ConsumerConfig(
            deliver_policy=api.DeliverPolicy.BY_START_TIME,
            opt_start_time=read_at - timedelta(seconds=self.options.overlap_s),
        )

    # -- 3. to 5.: every change, once, across reconnects ----------------------------------------

    async def _subscribe(self, config: api.ConsumerConfig) -> None:
        await self._unsubscribe()

        async def on_message(msg: Msg) -> None:
            self._queue.put_nowait(msg)

        self._subscription = await self.js.subscribe(
            self.options.subject,
            cb=on_message,
            ordered_consumer=True,
            idle_heartbeat=self.options.heartbeat_s,
            config=config,
            stream=STREAM,
        )

    async def _unsubscribe(self) -> None:
        subscription, self._subscription = self._subscription, None
        if subscription is not None:
            with contextlib.suppress(Exception):  # the old connection may be gone with it
                await subscription.unsubscribe()

    async def _resume(self) -> None:
        """After a reconnect: check the stream kept what we have not seen; subscribe again."""
        pause = 0.2
        while True:
            try:
                info = await self.js.stream_info(STREAM)
                break
            except Exception as exc:  # JetStream is still starting after a server restart
                log.info("stream not available yet: %s", exc)
                await asyncio.sleep(pause)
                pause = min(pause * 2, 5.0)
        state = info.state
        if self.last_sequence == 0:
            assert self._start is not None
            emit("resumed", after_sequence=0)
            await self._subscribe(self._start)  # nothing handled yet: start as planned
            return
        if state.last_seq < self.last_sequence or state.first_seq > self.last_sequence + 1:
            emit(
                "resync",
                reason="the stream no longer has the events after the last one handled",
                last_sequence=self.last_sequence,
                stream_first=state.first_seq,
                stream_last=state.last_seq,
            )
            await self.load_snapshots(kind="snapshot")
            self.last_sequence = min(self.last_sequence, state.last_seq)
        emit("resumed", after_sequence=self.last_sequence)
        await self._subscribe(_from_sequence(self.last_sequence + 1))

    async def handle(self, msg: Msg) -> None:
        sequence = msg.metadata.sequence.stream
        if sequence <= self.last_sequence:
            emit("skipped", sequence=sequence, why="handled already")
            return
        if (
            self.options.subject == ALL_EVENTS
            and self.last_sequence
            and sequence > self.last_sequence + 1
        ):
            # The whole stream is followed, so the numbers are consecutive unless the stream
            # dropped messages before they were read: what they said is in the snapshots.
            emit("resync", reason="gap", after_sequence=self.last_sequence, next=sequence)
            await self.load_snapshots(kind="snapshot")
        self.last_sequence = sequence
        try:
            event = decode(lowercase_headers(msg.headers), msg.data)
        except EventError as exc:
            emit("skipped", sequence=sequence, why=f"not a cdo event: {exc}")
            return
        why = self.view.apply(event)
        if why is None:
            emit("event", sequence=sequence, subject=msg.subject, **summary(event))
        else:
            emit("skipped", sequence=sequence, id=event.id, why=why)

    async def run(self) -> None:
        """Follow until :meth:`stop`; messages and reconnects are handled in arrival order."""
        await self.connect()
        try:
            self._start = await self.bootstrap()
            await self._subscribe(self._start)
            while (item := await self._queue.get()) is not _STOP:
                if item is _RECONNECTED:
                    await self._resume()
                else:
                    assert isinstance(item, Msg)
                    await self.handle(item)
        finally:
            emit("stopped", last_sequence=self.last_sequence)
            await self.close()

    def stop(self) -> None:
        self._queue.put_nowait(_STOP)


def _from_sequence(sequence: int) -> api.ConsumerConfig:
    return api.ConsumerConfig(
        deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=max(1, sequence)
    )


# -- the program ------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--nats-url",
        default=os.environ.get("CDO_NATS_URL", "nats://127.0.0.1:4222"),
        help="NATS server (default: $CDO_NATS_URL or nats://127.0.0.1:4222)",
    )
    parser.add_argument("--subject", default=ALL_EVENTS, help="subjects to follow (cdo.v1.>)")
    parser.add_argument(
        "--overlap-s",
        type=float,
        default=5.0,
        help="also replay this many seconds before the snapshots were read (default 5)",
    )
    parser.add_argument(
        "--heartbeat-s",
        type=float,
        default=2.0,
        help="idle heartbeat of the consumer: a silent consumer is replaced after two",
    )
    args = parser.parse_args(argv)
    return Options(
        nats_url=args.nats_url,
        subject=args.subject,
        overlap_s=args.overlap_s,
        heartbeat_s=args.heartbeat_s,
    )


async def amain(options: Options) -> int:
    follower = Follower(options)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, follower.stop)
    await follower.run()
    return 0


def main() -> None:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s"
    )
    raise SystemExit(asyncio.run(amain(parse_args())))


if __name__ == "__main__":
    main()
