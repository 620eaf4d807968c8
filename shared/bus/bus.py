"""The event bus: typed cdo events over NATS, as CloudEvents, traced and counted.

A service's bus (the runtime runs :meth:`EventBus.run` as a root task) never waits for NATS:

    bus = EventBus(settings, service="domain-controller", instance="pod-1",
                   metrics=metrics, tracer=tracer)
    await bus.subscribe(NodeFault.subject_template.wildcard(), on_fault, queue="controllers")
    bus.when_connected("membership", resync)       # after every (re)connection
    await bus.publish(NodeFault(node="n1", signal="xid", code=79, severity="fatal"))
    await bus.run()                                # connects, forever; never ends by itself

:meth:`run` connects in the background and keeps retrying with a capped backoff
(:mod:`shared.bus.link`); once connected, nats-py reconnects forever. On every connection it
binds to the stream and the bucket (which only the NATS bootstrap creates or changes:
:mod:`shared.bus.jetstream`), makes the subscriptions asked for meanwhile, sends
the events kept while disconnected, writes the snapshots again, then runs the
``when_connected`` callbacks. While NATS is down, publishing keeps events in the outbox (bounded;
the oldest is dropped and counted when full), subscribing records the subscription, and
:meth:`snapshots` raises :class:`BusUnavailableError`. ``cdo_bus_connected`` says whether the
feed is up. A short-lived client (a command, a test) calls :meth:`connect` and
:meth:`ensure_jetstream` instead, which fail when NATS cannot be reached within the budget.

Publishing sends the event with a reply subject and keeps it in an outbox until the JetStream
stream acknowledges it, re-sending it unchanged when the ack is late (:mod:`shared.bus.outbox`;
publishes are pipelined, none waits for its ack), plus, for events with a snapshot key, a
coalesced write of the latest state to the KV bucket. Without JetStream (``jetstream=False``)
a publish is a plain NATS publish. Every incoming message goes through one path: decode
(dropping and counting what does not decode), open a CONSUMER span whose parent comes from
``traceparent``, run the handler, count. A handler that raises is logged and counted; the
subscription keeps running.
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
from shared.bus.link import connect_forever, reconnect_delay, reconnect_handler
from shared.bus.outbox import Outbox
from shared.bus.settings import NatsSettings
from shared.bus.snapshots import SnapshotWriter
from shared.errors import BusClosedError, BusUnavailableError, EventError, FatalError
from shared.events.base import Event
from shared.events.registry import ENCODER, UNION_DECODER
from shared.events.subjects import ALL_EVENTS
from shared.metrics import Metrics

log = logging.getLogger("cdo.bus")

Handler = Callable[[Event], Awaitable[None]]
ConnectedCallback = Callable[[], Awaitable[None]]

SUBSCRIBE_FLUSH_TIMEOUT_S = 2
"""Seconds subscribe waits for the server to confirm the subscription while connected."""
CLOSE_ACK_WAIT_S = 2.0
"""Seconds close waits for the stream to acknowledge the events still in the outbox."""
STREAM_RECHECK_S = 10.0
"""Seconds between looks for the event stream and the bucket while a connection found none."""
CATCH_UP_WAIT_S = 5.0
"""Seconds a new connection waits for the stream to acknowledge the events kept while
disconnected before the ``when_connected`` callbacks run (so that they read a bucket holding
them)."""


class BusSubscription:
    """A live subscription the bus keeps: made on the connection as soon as there is one."""

    def __init__(self, subject: str, queue: str, callback: Callable[[Msg], Awaitable[None]]):
        self.subject = subject
        self.queue = queue
        self._callback = callback
        self._subscription: Subscription | None = None
        self._nc: BusClient | None = None
        self._ended = False

    @property
    def active(self) -> bool:
        """Whether it is made on a connection (the server has it, or gets it on reconnect)."""
        return self._subscription is not None

    async def attach(self, nc: BusClient) -> None:
        """Subscribe on ``nc`` unless already subscribed or ended."""
        if self._subscription is None and not self._ended:
            self._nc = nc
            self._subscription = await nc.subscribe(
                self.subject, queue=self.queue, cb=self._callback
            )

    async def unsubscribe(self) -> None:
        """End it: no message is delivered after this returns."""
        self._ended = True
        subscription, self._subscription = self._subscription, None
        if subscription is not None:
            with contextlib.suppress(nats_errors.Error):
                await subscription.unsubscribe()

    async def drain(self) -> None:
        """End it, letting the messages already received finish; while disconnected, end it
        at once (a drain waits for the server's answer, which would not come)."""
        self._ended = True
        subscription, self._subscription = self._subscription, None
        if subscription is None:
            return
        if self._nc is not None and self._nc.is_connected:
            await cancellable(subscription.drain())  # type: ignore[no-untyped-call]
        else:
            with contextlib.suppress(nats_errors.Error):
                await subscription.unsubscribe()


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
        self._bucket_missing = False
        self._subscriptions: list[BusSubscription] = []
        self._consumers: list[Subscription] = []
        self._stopping = False
        self._snapshots = SnapshotWriter(
            bucket=settings.snapshot_bucket,
            publish=self._publish_block,
            connected=lambda: self.is_connected,
        )
        self._kinds: dict[type[Event], Kind] = {}
        self._outbox_started = False
        self._outbox: Outbox | None = None
        if settings.jetstream:
            self._outbox = Outbox(
                send=self._publish_with_reply,
                metrics=metrics,
                capacity=settings.outbox_size,
                ack_timeout_s=settings.publish_ack_timeout_s,
                connected=lambda: self._outbox_started and self.is_connected,
            )
        self._callbacks: list[tuple[str, ConnectedCallback]] = []
        self._set_up = asyncio.Event()
        """Set once run() has set the current connection up; cleared while it sets one up."""
        self._running = False
        """Set by run(): this bus keeps its connection itself (a service's)."""
        self._prepared = 0
        """The connection (by count) whose JetStream objects were set up last."""
        metrics.bus_connected.set_function(lambda: 1.0 if self.is_connected else 0.0)

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
            raise BusUnavailableError("the bus is not connected yet")
        return self._nc

    @property
    def js(self) -> JetStreamContext:
        if self._js is None:
            self._js = self.nc.jetstream()
        return self._js

    async def connect(self) -> None:
        """Connect to NATS, retrying within the configured budget; BusClosedError when it runs
        out. For short-lived clients: a service's bus connects in :meth:`run`."""
        try:
            self._nc = await cancellable(
                connect(
                    self._settings,
                    name=self._name,
                    watch=self._watch,
                    reconnect_handler=reconnect_handler(self._settings),
                ),
                keep=self._keep,
            )
        except Exception as exc:
            raise BusClosedError(
                f"could not connect to NATS at {self._settings.url}: {type(exc).__name__}: {exc}"
            ) from exc
        log.info("nats connected", extra={"url": self.nc.connected_url.netloc})  # type: ignore[union-attr]

    def _keep(self, nc: BusClient) -> None:
        # Connected as the task was cancelled: held, so that close() still closes it.
        self._nc = nc

    @property
    def feed_up(self) -> bool:
        """Connected, and (for a service's bus) the connection is set up: stream and bucket
        there, subscriptions made, kept events sent."""
        if not self.is_connected:
            return False
        return not self._running or self._set_up.is_set()

    async def up_within(self, wait_s: float) -> bool:
        """Wait at most ``wait_s`` for the feed to be up (a service that just started gives
        its first connection this long before it goes on without); whether it is."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._set_up.wait(), wait_s)
        return self.feed_up

    async def wait_connected(self) -> None:
        """Wait until the first connection is made (by :meth:`run`)."""
        await self._watch.next_connection(after=0)

    def when_connected(self, name: str, callback: ConnectedCallback) -> None:
        """Run ``callback`` after every connection :meth:`run` makes (the first and each
        reconnection), once the events kept meanwhile are sent and acknowledged (or
        :data:`CATCH_UP_WAIT_S` passed): a publisher brings its snapshots up to date there. An
        exception is logged and counted; the callback runs again on the next connection."""
        self._callbacks.append((name, callback))

    async def ensure_jetstream(self) -> None:
        """Bind to the event stream and the snapshot bucket (the NATS bootstrap makes them;
        a bus never creates or changes them) and start receiving the stream's acks. A missing
        stream or bucket is said once and looked for again (see :meth:`run`): events go out
        without acknowledgement, snapshots are not kept meanwhile. Nothing without JetStream."""
        self._prepared = self._watch.connections
        if not self._settings.jetstream:
            return
        kv = await cancellable(jetstream.bound_bucket(self.js, self._settings))
        if kv is None and not self._bucket_missing:
            log.warning(
                "no snapshot bucket: snapshots are not kept until the NATS bootstrap makes it",
                extra={"bucket": self._settings.snapshot_bucket},
            )
        elif kv is not None and self._bucket_missing:
            log.info("snapshot bucket found", extra={"bucket": self._settings.snapshot_bucket})
        self._kv, self._bucket_missing = kv, kv is None
        stream = await cancellable(jetstream.has_stream(self.js, self._settings))
        outbox = self._outbox
        if outbox is None:
            return
        if not self._outbox_started:
            nc = self.nc
            await cancellable(
                outbox.start(nc.new_inbox(), lambda subject, cb: nc.subscribe(subject, cb=cb))
            )
            self._outbox_started = True
        if not stream and not outbox.plain:
            log.warning(
                "no event stream: events are published without acknowledgement until the "
                "NATS bootstrap makes it",
                extra={"stream": self._settings.stream},
            )
        elif stream and outbox.plain:
            log.info("event stream found", extra={"stream": self._settings.stream})
        outbox.plain = not stream

    @property
    def jetstream_missing(self) -> bool:
        """The connection was set up without the stream or without the bucket."""
        return self._bucket_missing or (self._outbox is not None and self._outbox.plain)

    async def run(self) -> None:
        """Root task of a service: connect (retrying forever), set every connection up, write
        snapshots and re-send unacknowledged events while connected. Never ends by itself."""
        self._running = True
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self._snapshots.run(), name="bus-snapshots")
            if self._outbox is not None:
                tasks.create_task(self._outbox.run(), name="bus-outbox")
            tasks.create_task(self._follow_connections(tasks), name="bus-connection")

    async def _follow_connections(self, tasks: asyncio.TaskGroup) -> None:
        if self._nc is None:
            self._nc = await connect_forever(
                self._settings, name=self._name, watch=self._watch, keep=self._keep
            )
        else:
            self._nc.reconnect_forever()
        callbacks: asyncio.Task[None] | None = None
        while True:
            seen = self._watch.connections
            if self._prepared < seen:
                if await self._set_up_connection() and self._callbacks:
                    # In a task of their own: a slow callback never holds up the next
                    # connection's set-up; a new connection's callbacks replace the old ones.
                    if callbacks is not None:
                        callbacks.cancel()
                    callbacks = tasks.create_task(self._run_callbacks(), name="bus-callbacks")
            else:  # set up already by a client's own ensure_jetstream
                self._set_up.set()
            while self._settings.jetstream and self.jetstream_missing:
                # No stream or bucket when this connection was set up: the NATS bootstrap may
                # make them later.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(
                        self._watch.next_connection(after=seen), STREAM_RECHECK_S
                    )
                if self._watch.connections > seen:
                    break
                without_bucket = self._bucket_missing
                with contextlib.suppress(nats_errors.Error, TimeoutError, BusUnavailableError):
                    await self.ensure_jetstream()
                if without_bucket and not self._bucket_missing:
                    # A bucket made meanwhile holds nothing of this publisher's yet.
                    self._snapshots.rewrite_all()
            await self._watch.next_connection(after=seen)

    async def _set_up_connection(self) -> bool:
        """What every connection needs, tried again with the backoff while it fails (JetStream
        may still be loading on a server that just restarted); False if the connection went
        away first."""
        self._set_up.clear()
        failures = 0
        while self.is_connected and not self._stopping:
            try:
                await self._prepare_connection()
            except (nats_errors.Error, TimeoutError, OSError, BusUnavailableError) as exc:
                failures += 1
                self._metrics.errors.labels("bus_setup").inc()
                log.warning(
                    "setting up the event feed failed; trying again",
                    extra={"error": f"{type(exc).__name__}: {exc}", "failures": failures},
                )
                await asyncio.sleep(
                    reconnect_delay(
                        failures,
                        first_s=self._settings.reconnect_wait_s,
                        cap_s=self._settings.reconnect_max_wait_s,
                    )
                )
                continue
            break
        else:
            return False
        self._set_up.set()
        return True

    async def _prepare_connection(self) -> None:
        await self.ensure_jetstream()
        nc = self.nc
        for subscription in list(self._subscriptions):
            await subscription.attach(nc)
        if self._outbox is not None:
            sent = await self._outbox.send_all()
            if sent:
                log.info("sending the events kept while disconnected", extra={"events": sent})
        self._snapshots.rewrite_all()

    async def _run_callbacks(self) -> None:
        await self.acknowledged(CATCH_UP_WAIT_S)
        with contextlib.suppress(Exception):
            await self._snapshots.flush()
        for name, callback in self._callbacks:
            try:
                await callback()
            except (asyncio.CancelledError, FatalError):
                raise
            except Exception as exc:
                self._metrics.errors.labels("bus_callback").inc()
                log.warning(
                    "a callback after connecting failed; it runs again on the next connection",
                    extra={"callback": name, "error": f"{type(exc).__name__}: {exc}"},
                )

    # -- publishing -------------------------------------------------------------------------

    async def _publish_block(self, subject: str, block: bytes, payload: bytes) -> None:
        await self.nc.publish_block(subject, block, payload)

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

        With JetStream the event stays in the outbox until the stream acknowledges it (while
        disconnected it only waits there); a send that fails while the connection may still
        come back is counted and left to the outbox to re-send. Without JetStream a publish
        that cannot be sent raises (BusUnavailableError while not connected)."""
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
        # A client that connected without ensure_jetstream publishes plainly, as before it
        # knows of a stream; a service's bus (run) keeps events until its connection is set up.
        outbox = self._outbox
        if outbox is not None and not (
            self._outbox_started or self._running or not self.is_connected
        ):
            outbox = None
        try:
            if outbox is None:
                await self.nc.publish_block(place.subject, block, payload)
            else:
                await outbox.publish(place.subject, block, payload)
        except Exception as exc:
            tracing.mark_error(span, exc)
            self._metrics.publish_errors.labels(kind.ce_type).inc()
            if outbox is None or (self._nc is not None and self._nc.is_closed):
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
        """Published events the stream has not acknowledged yet (kept ones included)."""
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
    ) -> BusSubscription:
        """Receive live events on ``subject`` (wildcards allowed).

        With ``queue`` set, replicas of a consumer that share the name split the messages
        between them (a NATS queue group) instead of each getting every one. When this
        returns while connected, the server has the subscription: an event published
        afterwards, from any connection, is delivered. Before the first connection the
        subscription is recorded and made as soon as there is one.
        """

        # nats-py awaits the callback's result; a partial saves a coroutine per message.
        on_message = functools.partial(self._deliver, handler, queue)
        subscription = BusSubscription(subject, queue or "", on_message)
        self._subscriptions.append(subscription)
        if self._nc is None or self._nc.is_closed:
            return subscription
        await subscription.attach(self._nc)
        # SUB only sits in the client's buffer until flushed; a PING round trip puts it on
        # the server before the caller goes on to trigger what it waits for. While the
        # connection is down the client resends the subscription on reconnect anyway.
        with contextlib.suppress(
            nats_errors.FlushTimeoutError,
            nats_errors.ConnectionClosedError,
            nats_errors.ConnectionReconnectingError,
        ):
            await self._nc.flush(timeout=SUBSCRIBE_FLUSH_TIMEOUT_S)
        return subscription

    async def consume(
        self,
        handler: DeliveryHandler,
        *,
        subject: str = ALL_EVENTS,
        start: StartAt | None = None,
    ) -> Subscription:
        """Replay the retained history on ``subject`` from ``start``, then follow live events
        (needs a connection: BusUnavailableError without one).

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
        self._consumers.append(subscription)
        return subscription

    async def snapshots(self, keys: str = ">") -> list[Event]:
        """The latest snapshot of every key matching ``keys`` (a KV key pattern).

        Raises BusUnavailableError while NATS is not connected: the caller goes on without
        them (a publisher then publishes what it has, and catches up in a ``when_connected``
        callback)."""
        if not self.feed_up:
            raise BusUnavailableError("NATS is not connected (or not set up yet): no snapshots")
        try:
            # nats-py may swallow a cancellation in the middle: raised again at the end.
            return await cancellable(self._read_snapshots(keys))
        except (nats_errors.Error, TimeoutError) as exc:
            # The connection or the bucket went away meanwhile: the same as not connected.
            raise BusUnavailableError(
                f"cannot read the snapshots: {type(exc).__name__}: {exc}"
            ) from exc

    async def _read_snapshots(self, keys: str) -> list[Event]:
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
        consumers, self._consumers = self._consumers, []
        for subscription in subscriptions:
            await _drained(subscription.drain())
        for consumer in consumers:
            if self.is_connected:
                await _drained(cancellable(consumer.drain()))  # type: ignore[no-untyped-call]
            else:
                await _drained(consumer.unsubscribe())

    async def close(self) -> None:
        """Write pending snapshots, wait briefly for the stream's acks, flush publishes and
        close the connection; at once when it is down. A close cut short (a caller's timeout,
        a cancellation) still closes the socket: it never outlives the bus."""
        self._stopping = True
        self._watch.closing = True
        nc = self._nc
        if nc is None or nc.is_closed:
            return
        try:
            await self._close_connection(nc)
        except BaseException:
            nc.shut()
            raise

    async def _close_connection(self, nc: BusClient) -> None:
        if not nc.is_connected:
            if self.unacknowledged:
                log.warning(
                    "closing while NATS is down: events kept in the outbox are lost",
                    extra={"events": self.unacknowledged},
                )
            await cancellable(nc.close())
            return
        try:
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
            try:
                await cancellable(nc.drain())
            except nats_errors.ConnectionReconnectingError:
                await cancellable(nc.close())


async def _drained(drain: Awaitable[None]) -> None:
    try:
        await drain
    except Exception as exc:  # a subscription of a dead connection cannot drain
        log.debug("subscription drain failed", extra={"error": str(exc)})
