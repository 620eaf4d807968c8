"""The event bus: typed cdo events over NATS, as CloudEvents, traced and counted.

    bus = EventBus(settings, service="domain-controller", instance="pod-1",
                   metrics=metrics, tracer=tracer)
    await bus.connect()
    await bus.ensure_jetstream()
    await bus.subscribe(NodeFault.subject_template.wildcard(), on_fault, queue="controllers")
    await bus.publish(NodeFault(node="n1", signal="xid", code=79, severity="fatal"))

Publishing sends the event with a reply subject and keeps it in an outbox until the JetStream
stream acknowledges it, re-sending it unchanged when the ack is late (:mod:`shared.bus.outbox`;
publishes are pipelined, none waits for its ack), plus, for events with a snapshot key, a
coalesced write of the latest state to the KV bucket. Without JetStream (``jetstream=False``)
a publish is a plain NATS publish. Every incoming message goes through one path: decode
(dropping and counting what does not decode), open a CONSUMER span whose parent comes from
``traceparent``, run the handler, count. A handler that raises is logged and counted; the
subscription keeps running.

Run :meth:`EventBus.run` as a root task of the service: it writes snapshots, re-sends events
whose ack is late, and raises BusClosedError when the connection closes for good.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable

import msgspec
from nats import errors as nats_errors
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext
from nats.js.kv import KeyValue
from opentelemetry.trace import Tracer

from shared import tracing
from shared.bus import cloudevents, jetstream, wire
from shared.bus.cancellation import cancellable
from shared.bus.client import BusClient
from shared.bus.connection import ConnectionWatch, connect
from shared.bus.history import Delivery, DeliveryHandler, StartAt, latest_values
from shared.bus.kinds import Kind
from shared.bus.outbox import Outbox
from shared.bus.settings import NatsSettings
from shared.bus.snapshots import SnapshotWriter
from shared.errors import BusClosedError, EventError, FatalError
from shared.events.base import Event
from shared.events.registry import ENCODER, UNION_DECODER
from shared.events.subjects import ALL_EVENTS
from shared.metrics import Metrics

log = logging.getLogger("cdo.bus")

Handler = Callable[[Event], Awaitable[None]]

SUBSCRIBE_FLUSH_TIMEOUT_S = 2
"""Seconds subscribe waits for the server to confirm the subscription while connected."""
CLOSE_ACK_WAIT_S = 2.0
"""Seconds close waits for the stream to acknowledge the events still in the outbox."""


class EventBus:
    """Publish and receive cdo events. One per service instance."""

    def __init__(
        self,
        settings: NatsSettings,
        *,
        service: str,
        instance: str,
        metrics: Metrics,
        tracer: Tracer,
    ) -> None:
        self._settings = settings
        self._name = f"{service}/{instance}"
        self.source = f"cdo/{service}/{instance}"
        self._metrics = metrics
        self._tracer = tracer
        self._spans = tracing.MessagingTracer(tracer)
        self._watch = ConnectionWatch()
        self._nc: BusClient | None = None
        self._js: JetStreamContext | None = None
        self._kv: KeyValue | None = None
        self._subscriptions: list[Subscription] = []
        self._stopping = False
        self._snapshots = SnapshotWriter(
            bucket=settings.snapshot_bucket, publish=self._publish_block
        )
        self._kinds: dict[type[Event], Kind] = {}
        self._outbox: Outbox | None = None
        """Set once :meth:`ensure_jetstream` has seen the stream; until then publishes are
        plain ones."""
        self._outbox_ready = asyncio.Event()

    # -- connection -------------------------------------------------------------------------

    @property
    def is_connected(self) -> bool:
        return self._nc is not None and self._nc.is_connected

    @property
    def watch(self) -> ConnectionWatch:
        return self._watch

    @property
    def nc(self) -> BusClient:
        if self._nc is None:
            raise RuntimeError("the bus is not connected yet")
        return self._nc

    @property
    def js(self) -> JetStreamContext:
        if self._js is None:
            self._js = self.nc.jetstream()
        return self._js

    async def connect(self) -> None:
        """Connect to NATS, retrying within the configured budget; fatal when it runs out."""
        try:
            self._nc = await cancellable(
                connect(self._settings, name=self._name, watch=self._watch), keep=self._keep
            )
        except Exception as exc:
            raise BusClosedError(
                f"could not connect to NATS at {self._settings.url}: {type(exc).__name__}: {exc}"
            ) from exc
        log.info("nats connected", extra={"url": self.nc.connected_url.netloc})  # type: ignore[union-attr]

    def _keep(self, nc: BusClient) -> None:
        # Connected as the task was cancelled: held, so that close() still closes it.
        self._nc = nc

    async def ensure_jetstream(self) -> None:
        """Create or update the event stream and the snapshot bucket (idempotent), or check
        the bucket is there; nothing without JetStream."""
        if not self._settings.jetstream:
            return
        if self._settings.manage_jetstream:
            await cancellable(jetstream.ensure_stream(self.js, self._settings))
            self._kv = await cancellable(jetstream.ensure_bucket(self.js, self._settings))
            stream = True
        else:
            self._kv = await cancellable(self.js.key_value(self._settings.snapshot_bucket))
            stream = await cancellable(jetstream.has_stream(self.js, self._settings))
        if stream and self._outbox is None:
            outbox = Outbox(
                send=self._publish_with_reply,
                metrics=self._metrics,
                capacity=self._settings.outbox_size,
                ack_timeout_s=self._settings.publish_ack_timeout_s,
                connected=lambda: self.is_connected,
            )
            nc = self.nc
            await cancellable(
                outbox.start(nc.new_inbox(), lambda subject, cb: nc.subscribe(subject, cb=cb))
            )
            self._outbox = outbox
            self._outbox_ready.set()
        elif not stream:
            log.warning(
                "no event stream: events are published without acknowledgement",
                extra={"stream": self._settings.stream},
            )

    async def run(self) -> None:
        """Root task: write snapshots and re-send unacknowledged events; raise BusClosedError
        if the connection closes for good."""
        writer = asyncio.create_task(self._snapshots.run(), name="bus-snapshots")
        closed = asyncio.create_task(self._watch.closed.wait(), name="bus-closed")
        resender = asyncio.create_task(self._resend(), name="bus-outbox")
        tasks = {writer, closed, resender}
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            if self._watch.closed.is_set() and not self._stopping:
                raise BusClosedError("the NATS connection closed and will not come back")
            for task in done - {closed}:
                task.result()  # re-raises why the snapshot writer or the outbox stopped
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    # -- publishing -------------------------------------------------------------------------

    async def _publish_block(self, subject: str, block: bytes, payload: bytes) -> None:
        await self.nc.publish_block(subject, block, payload)

    async def _resend(self) -> None:
        # The outbox appears with ensure_jetstream, which may come after run started.
        await self._outbox_ready.wait()
        if self._outbox is not None:
            await self._outbox.run()

    async def _publish_with_reply(
        self, subject: str, block: bytes, payload: bytes, reply: str
    ) -> None:
        await self.nc.publish_block(subject, block, payload, reply)

    def _kind(self, cls: type[Event]) -> Kind:
        kind = self._kinds.get(cls)
        if kind is None:
            kind = self._kinds[cls] = Kind(cls)
        return kind

    async def publish(self, event: Event) -> None:
        """Publish ``event`` on its subject, traced, and record it as the latest snapshot.

        With JetStream the event stays in the outbox until the stream acknowledges it; a send
        that fails while the connection may still come back is counted and left to the
        outbox to re-send, one on a closed connection raises."""
        kind = self._kind(type(event))
        if not event.source:
            event = msgspec.structs.replace(event, source=self.source)
        place = kind.place(event)
        payload = ENCODER.encode(event)
        span, traceparent, tracestate = self._spans.start_publish(
            subject=place.subject, template=kind.template
        )
        lines = cloudevents.event_header_lines(event)
        if traceparent is not None:
            lines += f"traceparent: {traceparent}\r\n"
            if tracestate is not None:
                lines += wire.header_line("tracestate", tracestate)
        block = place.block_start + lines.encode() + wire.END
        try:
            if self._outbox is None:
                await self.nc.publish_block(place.subject, block, payload)
            else:
                await self._outbox.publish(place.subject, block, payload)
        except Exception as exc:
            tracing.mark_error(span, exc)
            self._metrics.publish_errors.labels(kind.ce_type).inc()
            if self._outbox is None or self.nc.is_closed:
                raise
            log.debug("publish failed, kept for re-sending", extra={"error": str(exc)})
        finally:
            span.end()
        counter = kind.published
        if counter is None:
            counter = kind.published = self._metrics.messages_published.labels(kind.ce_type)
        counter.inc()
        if place.snapshot_key is not None:
            self._snapshots.offer(place.snapshot_key, payload, block)

    async def flush(self) -> None:
        """Write pending snapshots and wait until the server has every publish so far."""
        await self._snapshots.flush()
        await cancellable(self.nc.flush())

    @property
    def unacknowledged(self) -> int:
        """Published events the stream has not acknowledged yet."""
        return 0 if self._outbox is None else self._outbox.pending

    async def acknowledged(self, wait_s: float) -> bool:
        """Wait until the stream has acknowledged every event published so far, at most
        ``wait_s`` seconds; whether it has (re-sending needs :meth:`run`)."""
        return True if self._outbox is None else await self._outbox.settled(wait_s)

    # -- receiving --------------------------------------------------------------------------

    def _drop(self, reason: str, message: str, subject: str) -> None:
        self._metrics.messages_dropped.labels(reason).inc()
        log.warning(
            "dropped message", extra={"reason": reason, "subject": subject, "error": message}
        )

    async def _deliver(
        self,
        call: Callable[[Event], Awaitable[None]],
        queue: str | None,
        msg: Msg,
    ) -> None:
        """Decode one message and run ``call`` in a CONSUMER span; never raises."""
        headers = cloudevents.lowercase_headers(msg.headers)
        try:
            event = cloudevents.decode(headers, msg.data)
        except EventError as exc:
            self._drop(exc.reason, str(exc), msg.subject)
            return
        kind = self._kind(type(event))
        started = time.perf_counter()
        span, token = self._spans.start_process(
            headers=headers,
            subject=msg.subject,
            template=kind.template,
            consumer_group=queue,
        )
        try:
            await call(event)
        except FatalError:
            raise
        except Exception as exc:
            tracing.mark_error(span, exc)
            self._metrics.errors.labels("event_handler").inc()
            self._metrics.messages_dropped.labels("handler_error").inc()
            log.exception("event handler failed", extra={"subject": msg.subject})
            return
        finally:
            tracing.end_process_span(span, token)
        if kind.received is None:
            kind.received = self._metrics.messages_received.labels(kind.ce_type)
            kind.handle_seconds = self._metrics.handle_seconds.labels(kind.ce_type)
        kind.received.inc()
        kind.handle_seconds.observe(time.perf_counter() - started)

    async def subscribe(
        self, subject: str, handler: Handler, *, queue: str | None = None
    ) -> Subscription:
        """Receive live events on ``subject`` (wildcards allowed).

        With ``queue`` set, replicas of a consumer that share the name split the messages
        between them (a NATS queue group) instead of each getting every one. When this
        returns, the server has the subscription: an event published afterwards, from any
        connection, is delivered.
        """

        # nats-py awaits the callback's result; a partial saves a coroutine per message.
        on_message = functools.partial(self._deliver, handler, queue)
        subscription = await self.nc.subscribe(subject, queue=queue or "", cb=on_message)
        self._subscriptions.append(subscription)
        # SUB only sits in the client's buffer until flushed; a PING round trip puts it on
        # the server before the caller goes on to trigger what it waits for. While the
        # connection is down the client resends the subscription on reconnect anyway.
        with contextlib.suppress(nats_errors.FlushTimeoutError, nats_errors.ConnectionClosedError):
            await self.nc.flush(timeout=SUBSCRIBE_FLUSH_TIMEOUT_S)
        return subscription

    async def consume(
        self,
        handler: DeliveryHandler,
        *,
        subject: str = ALL_EVENTS,
        start: StartAt | None = None,
    ) -> Subscription:
        """Replay the retained history on ``subject`` from ``start``, then follow live events.

        An ordered consumer: events arrive once each, in stream order, with their stream
        sequence, which lets a subscriber resume exactly where it stopped.
        """
        start = start or StartAt()

        async def on_message(msg: Msg) -> None:
            sequence = msg.metadata.sequence.stream

            async def call(event: Event) -> None:
                await handler(Delivery(event=event, subject=msg.subject, stream_sequence=sequence))

            await self._deliver(call, None, msg)

        subscription = await self.js.subscribe(
            subject,
            cb=on_message,
            ordered_consumer=True,
            config=start.consumer_config(),
            stream=self._settings.stream,
        )
        self._subscriptions.append(subscription)
        return subscription

    async def snapshots(self, keys: str = ">") -> list[Event]:
        """The latest snapshot of every key matching ``keys`` (a KV key pattern)."""
        if self._kv is None:
            self._kv = await self.js.key_value(self._settings.snapshot_bucket)
        events: list[Event] = []
        async for payload in latest_values(self._kv, keys):
            try:
                events.append(UNION_DECODER.decode(payload))
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                self._drop("malformed", f"snapshot: {exc}", keys)
        return events

    # -- shutdown ---------------------------------------------------------------------------

    async def stop_intake(self) -> None:
        """Stop receiving: drain every subscription so handlers in flight finish."""
        subscriptions, self._subscriptions = self._subscriptions, []
        for subscription in subscriptions:
            try:
                await cancellable(subscription.drain())  # type: ignore[no-untyped-call]
            except Exception as exc:  # a subscription of a dead connection cannot drain
                log.debug("subscription drain failed", extra={"error": str(exc)})

    async def close(self) -> None:
        """Write pending snapshots, wait briefly for the stream's acks, flush publishes and
        close the connection."""
        self._stopping = True
        self._watch.closing = True
        if self._nc is None or self._nc.is_closed:
            return
        try:
            if self._nc.is_connected:
                try:
                    await self._snapshots.flush()
                except Exception as exc:
                    log.warning("snapshot flush at shutdown failed", extra={"error": str(exc)})
                if not await self.acknowledged(CLOSE_ACK_WAIT_S):
                    log.warning(
                        "closing with events the stream has not acknowledged",
                        extra={"events": self.unacknowledged},
                    )
        finally:
            # Also when cancelled while waiting for acks: the connection is closed all the same.
            await cancellable(self._nc.drain())
