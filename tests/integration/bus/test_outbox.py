"""At-least-once publishing into the stream, against a real nats-server with JetStream: events
published while the server is down and restarted are all stored once, a re-send after a lost
ack is stored once, the outbox is bounded, and a subject no stream captures still works."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from opentelemetry.sdk.trace import TracerProvider

from shared.bus import Delivery, EventBus, NatsSettings, StartAt, cloudevents, jetstream, wire
from shared.bus.client import BusClient
from shared.bus.outbox import MAX_SENDS, NO_STREAM_ANSWERS, Outbox
from shared.events import Event, NodeRecovered
from shared.events.subjects import ALL_EVENTS
from shared.metrics import Metrics
from sim.natsserver import NatsServer
from tests.conftest import BusFactory
from tests.support.tasks import running
from tests.support.wait import wait_for


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


async def replay_ids(bus: EventBus, expected: int) -> list[str]:
    """The ce-ids the stream holds, in stream order, once it holds ``expected`` events."""
    replayed: list[Delivery] = []

    async def on_delivery(delivery: Delivery) -> None:
        replayed.append(delivery)

    subscription = await bus.consume(on_delivery, start=StartAt())
    await wait_for(lambda: len(replayed) >= expected, timeout=20, what="the replay")
    await subscription.unsubscribe()
    info = await bus.js.stream_info("CDO")
    assert info.state.messages == len(replayed)
    return [d.event.id for d in replayed]


async def test_no_event_is_lost_while_the_streams_server_restarts(
    nats_server: NatsServer, bus_factory: BusFactory
) -> None:
    settings = NatsSettings(
        url=nats_server.url,
        reconnect_wait_s=0.1,
        max_reconnect_attempts=-1,
        publish_ack_timeout_s=0.5,
    )
    metrics = Metrics()
    publisher = await bus_factory("publisher", settings=settings, metrics=metrics)
    published: list[str] = []

    async def publish(count: int) -> None:
        for _ in range(count):
            event = NodeRecovered(node=f"n{len(published)}")
            await publisher.publish(event)
            published.append(event.id)
            await asyncio.sleep(0)  # lets the client's reader notice a dead connection

    async with running(publisher.run()):
        await publish(100)
        nats_server.kill()
        # Published while the server is gone: some go to the dead socket before the client
        # notices, the rest into its reconnect buffer.
        await publish(200)
        assert not publisher.is_connected
        nats_server.start()  # same port, same store
        await wait_for(lambda: publisher.is_connected, timeout=20, what="the reconnect")
        await publish(100)
        assert await publisher.acknowledged(30), f"{publisher.unacknowledged} unacknowledged"

    reader = await bus_factory("reader")
    ids = await replay_ids(reader, len(published))
    assert sorted(ids) == sorted(published), "every event in the stream exactly once"
    assert sample(metrics, "cdo_bus_outbox_events") == 0
    stored = sample(metrics, "cdo_bus_publish_acks_total", result="stored")
    duplicate = sample(metrics, "cdo_bus_publish_acks_total", result="duplicate")
    # Each event completes once: stored, or duplicate where its first ack was lost.
    assert stored + duplicate == len(published)
    for result in ("no_stream", "unanswered", "rejected", "malformed"):
        assert sample(metrics, "cdo_bus_publish_acks_total", result=result) == 0


class LossyLink:
    """The outbox's ack subscription, on a real connection, losing acks while ``lose`` is set."""

    def __init__(self, nc: BusClient) -> None:
        self.nc = nc
        self.lose = True
        self.lost = 0

    async def subscribe(self, subject: str, cb: Callable[[Msg], Awaitable[None]]) -> Subscription:
        async def on_ack(msg: Msg) -> None:
            if self.lose:
                self.lost += 1
                return
            await cb(msg)

        return await self.nc.subscribe(subject, cb=on_ack)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def outbox_on(
    nc: BusClient, metrics: Metrics, *, capacity: int = 100, connected: list[bool] | None = None
) -> tuple[Outbox, LossyLink, Clock]:
    """An outbox on ``nc``; ``connected`` (a one-item list) says whether it may send."""
    online = connected if connected is not None else [True]

    async def send(subject: str, block: bytes, payload: bytes, reply: str) -> None:
        await nc.publish_block(subject, block, payload, reply)

    clock = Clock()
    outbox = Outbox(
        send=send,
        metrics=metrics,
        capacity=capacity,
        ack_timeout_s=1.0,
        connected=lambda: online[0],
        clock=clock,
    )
    link = LossyLink(nc)
    await outbox.start(nc.new_inbox(), link.subscribe)
    return outbox, link, clock


def encoded(event: Event) -> tuple[str, bytes, bytes]:
    """Subject, header block and body of ``event`` as the bus sends them."""
    headers, body = cloudevents.encode(event)
    return event.subject(), wire.header_block(headers), body


async def test_a_resend_after_a_lost_ack_is_stored_once(bus_factory: BusFactory) -> None:
    bus = await bus_factory("owner")  # creates the stream
    metrics = Metrics()
    outbox, link, clock = await outbox_on(bus.nc, metrics)

    await outbox.publish(*encoded(NodeRecovered(node="lost-ack", source="cdo/test/x")))
    await wait_for(lambda: link.lost == 1, what="the first ack (lost)")
    assert outbox.pending == 1
    assert outbox.due(clock.now) == []  # not overdue yet

    link.lose = False
    clock.now += 1.0
    assert await outbox.resend_due() == 1
    assert await outbox.settled(5)
    assert sample(metrics, "cdo_bus_publish_retries_total") == 1
    assert sample(metrics, "cdo_bus_publish_acks_total", result="duplicate") == 1
    assert len(await replay_ids(bus, 1)) == 1


async def test_a_full_outbox_paces_a_burst_while_acks_come(bus_factory: BusFactory) -> None:
    bus = await bus_factory("owner")
    metrics = Metrics()
    outbox, link, _ = await outbox_on(bus.nc, metrics, capacity=3)
    link.lose = False
    for i in range(200):
        await outbox.publish(*encoded(NodeRecovered(node=f"p{i}", source="cdo/test/x")))
        assert outbox.pending <= 3
    assert await outbox.settled(5)
    assert sample(metrics, "cdo_bus_outbox_dropped_total") == 0
    assert sample(metrics, "cdo_bus_publish_acks_total", result="stored") == 200
    assert len(await replay_ids(bus, 200)) == 200


async def test_while_disconnected_events_wait_unsent_the_oldest_dropped_when_full(
    bus_factory: BusFactory,
) -> None:
    bus = await bus_factory("owner")
    metrics = Metrics()
    connected = [False]
    outbox, link, _ = await outbox_on(bus.nc, metrics, capacity=3, connected=connected)
    link.lose = False
    events = [NodeRecovered(node=f"b{i}", source="cdo/test/x") for i in range(5)]
    for event in events:
        await outbox.publish(*encoded(event))
    assert outbox.pending == 3
    assert sample(metrics, "cdo_bus_outbox_dropped_total") == 2
    assert sample(metrics, "cdo_bus_outbox_events") == 3
    assert await replay_ids(bus, 0) == []  # nothing was sent

    # The connection is back: the newest three go out, each stored once.
    connected[0] = True
    assert await outbox.send_all() == 3
    assert await outbox.settled(5)
    assert sample(metrics, "cdo_bus_publish_acks_total", result="stored") == 3
    stored = await replay_ids(bus, 3)
    assert stored == [event.id for event in events[2:]]


async def test_without_a_stream_publishing_falls_back_to_plain_publishes(
    nats_server: NatsServer,
) -> None:
    owner = EventBus(
        NatsSettings(url=nats_server.url, publish_ack_timeout_s=0.1),
        service="test",
        instance="owner",
        metrics=(metrics := Metrics()),
        tracer=TracerProvider().get_tracer("test"),
    )
    await owner.connect()
    await owner.ensure_jetstream()
    # The stream goes away after start: the server answers "no responders" to each send.
    await owner.js.delete_stream("CDO")
    assert not await jetstream.has_stream(owner.js, NatsSettings())
    try:
        async with running(owner.run()):
            await owner.publish(NodeRecovered(node="nobody"))
            assert await owner.acknowledged(10)
        assert sample(metrics, "cdo_bus_publish_acks_total", result="no_stream") == 1
        assert sample(metrics, "cdo_bus_publish_retries_total") == NO_STREAM_ANSWERS - 1
    finally:
        await owner.close()


async def test_live_subscribers_without_a_stream_get_the_event_and_it_is_let_go(
    nats_server: NatsServer, bus_factory: BusFactory
) -> None:
    metrics = Metrics()
    publisher = await bus_factory(
        "publisher",
        settings=NatsSettings(url=nats_server.url, publish_ack_timeout_s=0.1),
        metrics=metrics,
    )
    listener = await bus_factory("listener", settings=NatsSettings(url=nats_server.url))
    await publisher.js.delete_stream("CDO")
    received: list[Event] = []

    async def on_event(event: Event) -> None:
        received.append(event)

    await listener.subscribe(ALL_EVENTS, on_event)
    event = NodeRecovered(node="heard")
    async with running(publisher.run()):
        await publisher.publish(event)
        assert await publisher.acknowledged(10)
    # Nobody answers (a subscriber does not ack): sent MAX_SENDS times, then let go.
    assert sample(metrics, "cdo_bus_publish_acks_total", result="unanswered") == 1
    await wait_for(lambda: len(received) == MAX_SENDS, what="every send at the subscriber")
    assert {e.id for e in received} == {event.id}


async def test_a_bus_without_jetstream_publishes_plainly(nats_server: NatsServer) -> None:
    bus = EventBus(
        NatsSettings(url=nats_server.url, jetstream=False),
        service="test",
        instance="plain",
        metrics=(metrics := Metrics()),
        tracer=TracerProvider().get_tracer("test"),
    )
    await bus.connect()
    await bus.ensure_jetstream()
    try:
        await bus.publish(NodeRecovered(node="plain"))
        assert bus.unacknowledged == 0
        assert await bus.acknowledged(0)
        assert sample(metrics, "cdo_bus_messages_published_total", type=NodeRecovered.ce_type())
    finally:
        await bus.close()
