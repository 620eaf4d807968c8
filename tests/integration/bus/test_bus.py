"""The event bus against a real nats-server with JetStream."""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import nats
import pytest
from cloudevents.core.bindings import http as ce_http
from cloudevents.core.v1.event import CloudEvent
from nats.aio.msg import Msg
from opentelemetry.sdk.trace import TracerProvider

from shared.bus import Delivery, EventBus, NatsSettings, StartAt, jetstream, wire
from shared.bus import cloudevents as ce
from shared.bus.client import BusClient
from shared.errors import BusUnavailableError
from shared.events import Event, NodeCapacity, NodeFault, NodeRecovered
from shared.events.catalog import CliqueCapacity
from shared.events.subjects import ALL_EVENTS
from shared.metrics import Metrics
from sim.natsserver import NatsServer
from tests.conftest import BusFactory
from tests.support.wait import wait_for
from tests.unit.events.samples import sample_events


def counter(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return value or 0.0


async def test_every_event_type_round_trips_with_headers_intact(
    bus_factory: BusFactory, nats_server: NatsServer
) -> None:
    publisher = await bus_factory("publisher")
    subscriber = await bus_factory("subscriber")
    received: list[Event] = []
    raw: list[Msg] = []

    async def on_event(event: Event) -> None:
        received.append(event)

    await subscriber.subscribe(ALL_EVENTS, on_event)
    plain = await nats.connect(nats_server.url)

    async def on_raw(msg: Msg) -> None:
        raw.append(msg)

    await plain.subscribe(ALL_EVENTS, cb=on_raw)
    await plain.flush()
    await subscriber.nc.flush()

    events = sample_events()
    for event in events:
        await publisher.publish(event)
    await wait_for(lambda: len(received) == len(events) == len(raw), what="all events")
    await plain.close()

    expected = [msgspec.structs.replace(e, source=publisher.source) for e in events]
    assert received == expected
    for msg, event in zip(raw, expected, strict=True):
        headers = msg.headers or {}
        assert msg.subject == event.subject()
        assert headers["ce-specversion"] == "1.0"
        assert headers["ce-id"] == headers["Nats-Msg-Id"] == event.id
        assert headers["ce-type"] == event.ce_type()
        assert headers["ce-source"] == publisher.source
        assert headers["content-type"] == "application/json"
        assert headers["traceparent"].startswith("00-")
        assert msgspec.json.decode(msg.data, type=type(event)) == event


async def test_a_jetstream_consumer_replays_history_and_resumes(bus_factory: BusFactory) -> None:
    publisher = await bus_factory("publisher")
    events = [NodeRecovered(node=f"n{i}") for i in range(5)]
    for event in events:
        await publisher.publish(event)
    await publisher.flush()

    late = await bus_factory("late")
    replayed: list[Delivery] = []

    async def on_delivery(delivery: Delivery) -> None:
        replayed.append(delivery)

    await late.consume(on_delivery, start=StartAt())
    await wait_for(lambda: len(replayed) == 5, what="replay")
    assert [d.event.id for d in replayed] == [e.id for e in events]
    sequences = [d.stream_sequence for d in replayed]
    assert sequences == sorted(sequences) and len(set(sequences)) == 5

    # A consumer that remembers its last sequence resumes exactly after it and then follows.
    resumed: list[Delivery] = []

    async def on_resumed(delivery: Delivery) -> None:
        resumed.append(delivery)

    await late.consume(on_resumed, start=StartAt(sequence=sequences[2] + 1))
    await publisher.publish(NodeRecovered(node="n-live"))
    await wait_for(lambda: len(resumed) == 3, what="resume and follow")
    assert [d.event.id for d in resumed[:2]] == [e.id for e in events[3:]]
    assert isinstance(resumed[2].event, NodeRecovered) and resumed[2].event.node == "n-live"


async def test_a_late_subscriber_reads_the_latest_snapshots(bus_factory: BusFactory) -> None:
    publisher = await bus_factory("publisher")
    clique = "c0ffee00-0000-4000-8000-000000000001.1"
    for free in (8, 4, 0):
        await publisher.publish(CliqueCapacity(clique=clique, gpus_total=8, gpus_free=free))
    await publisher.publish(NodeFault(node="n1.lab", signal="xid", code=79, severity="fatal"))
    await publisher.publish(NodeRecovered(node="n1.lab", signals=("xid",)))
    await publisher.flush()

    late = await bus_factory("late")

    async def snapshot_ready() -> list[Event] | None:
        snapshots = await late.snapshots()
        return snapshots if len(snapshots) == 2 else None

    snapshots = await wait_for(snapshot_ready, what="two snapshot keys")
    by_type = {type(event): event for event in snapshots}
    capacity = by_type[CliqueCapacity]
    assert isinstance(capacity, CliqueCapacity) and capacity.gpus_free == 0
    assert NodeRecovered in by_type and NodeFault not in by_type  # latest health state wins
    only_cliques = await late.snapshots("v1.clique.>")
    assert [type(e) for e in only_cliques] == [CliqueCapacity]


async def test_sdk_produced_messages_are_accepted_over_nats(
    bus_factory: BusFactory, nats_server: NatsServer
) -> None:
    subscriber = await bus_factory("subscriber")
    received: list[Event] = []

    async def on_event(event: Event) -> None:
        received.append(event)

    await subscriber.subscribe(ALL_EVENTS, on_event)
    await subscriber.nc.flush()
    sdk_event = CloudEvent(
        attributes={
            "type": NodeFault.ce_type(),
            "source": "/external/producer",
            "id": "ext-1",
            "time": datetime(2026, 1, 2, tzinfo=UTC),
            "datacontenttype": "application/json",
        },
        data={"node": "gb200-r2-n05", "signal": "fabric", "severity": "warning"},
    )
    message = ce_http.to_binary_event(sdk_event)
    plain = await nats.connect(nats_server.url)
    await plain.publish("cdo.v1.node.gb200-r2-n05.fault", message.body, headers=message.headers)
    await plain.close()
    await wait_for(lambda: received, what="sdk event")
    event = received[0]
    assert isinstance(event, NodeFault)
    assert (event.id, event.source, event.node) == ("ext-1", "/external/producer", "gb200-r2-n05")


async def test_our_messages_decode_with_the_sdk_over_nats(
    bus_factory: BusFactory, nats_server: NatsServer
) -> None:
    publisher = await bus_factory("publisher")
    plain = await nats.connect(nats_server.url)
    got: list[Msg] = []

    async def on_raw(msg: Msg) -> None:
        got.append(msg)

    await plain.subscribe(ALL_EVENTS, cb=on_raw)
    await plain.flush()
    event = NodeFault(node="n3", signal="xid", code=48, severity="fatal")
    await publisher.publish(event)
    await wait_for(lambda: got, what="raw message")
    await plain.close()
    decoded = ce_http.from_binary_event(
        ce_http.HTTPMessage(headers=dict(got[0].headers or {}), body=got[0].data)
    )
    assert decoded.get_id() == event.id
    assert decoded.get_type() == NodeFault.ce_type()
    data = decoded.get_data()
    assert isinstance(data, dict)
    assert data["code"] == 48


BAD_MESSAGES = [
    ("malformed", {"ce-type": NodeFault.ce_type()}, b"{oops"),
    ("malformed", {"ce-type": NodeFault.ce_type()}, b'{"node": 1}'),
    ("unknown_type", {"ce-type": "dev.cdo.v1.made.up"}, b"{}"),
    ("missing_header", None, b'{"node": "n"}'),
    ("missing_header", {"ce-type": NodeFault.ce_type(), "ce-id": ""}, b"{}"),
    ("content_type", {"ce-type": NodeFault.ce_type(), "content-type": "text/xml"}, b"<x/>"),
]


async def test_bad_messages_are_dropped_counted_and_the_subscriber_survives(
    bus_factory: BusFactory, nats_server: NatsServer
) -> None:
    metrics = Metrics()
    subscriber = await bus_factory("subscriber", metrics=metrics)
    received: list[Event] = []

    async def on_event(event: Event) -> None:
        received.append(event)

    await subscriber.subscribe(ALL_EVENTS, on_event)
    await subscriber.nc.flush()
    base = {"ce-specversion": "1.0", "ce-id": "x-1", "ce-source": "/test"}
    plain = await nats.connect(nats_server.url)
    for _reason, headers, body in BAD_MESSAGES:
        await plain.publish(
            "cdo.v1.node.n.fault", body, headers=None if headers is None else {**base, **headers}
        )
    good = NodeRecovered(node="after-the-garbage", source="/test")
    headers, body = ce.encode(good)
    await plain.publish(good.subject(), body, headers=headers)
    await plain.close()

    await wait_for(lambda: received, what="the good message after the bad ones")
    assert received == [good]
    expected: dict[str, int] = {}
    for reason, _headers, _body in BAD_MESSAGES:
        expected[reason] = expected.get(reason, 0) + 1
    for reason, count in expected.items():
        assert counter(metrics, "cdo_bus_messages_dropped_total", reason=reason) == count
    assert counter(metrics, "cdo_bus_messages_received_total", type=NodeRecovered.ce_type()) == 1


async def test_a_failing_handler_is_counted_and_the_subscription_continues(
    bus_factory: BusFactory,
) -> None:
    metrics = Metrics()
    subscriber = await bus_factory("subscriber", metrics=metrics)
    publisher = await bus_factory("publisher")
    handled: list[str] = []

    async def on_event(event: Event) -> None:
        assert isinstance(event, NodeRecovered)
        if event.node == "bad":
            raise ValueError("handler bug")
        handled.append(event.node)

    await subscriber.subscribe(ALL_EVENTS, on_event)
    await subscriber.nc.flush()
    for node in ("bad", "good"):
        await publisher.publish(NodeRecovered(node=node))
    await wait_for(
        lambda: (
            handled == ["good"]
            and counter(metrics, "cdo_bus_messages_dropped_total", reason="handler_error") == 1
        ),
        what="the failure counted and the next message handled",
    )


async def test_queue_groups_split_messages_between_replicas(bus_factory: BusFactory) -> None:
    publisher = await bus_factory("publisher")
    replicas = [await bus_factory(f"replica{i}") for i in range(2)]
    observer = await bus_factory("observer")
    per_replica: list[list[str]] = [[], []]
    observed: list[str] = []

    def collector(sink: list[str]):  # type: ignore[no-untyped-def]
        async def on_event(event: Event) -> None:
            sink.append(event.id)

        return on_event

    for replica, sink in zip(replicas, per_replica, strict=True):
        await replica.subscribe(ALL_EVENTS, collector(sink), queue="controllers")
        await replica.nc.flush()
    await observer.subscribe(ALL_EVENTS, collector(observed))
    await observer.nc.flush()
    sent = [NodeRecovered(node=f"n{i}") for i in range(40)]
    for event in sent:
        await publisher.publish(event)
    await wait_for(
        lambda: len(observed) == 40 and sum(map(len, per_replica)) == 40, what="all deliveries"
    )
    together = per_replica[0] + per_replica[1]
    assert sorted(together) == sorted(e.id for e in sent)  # each exactly once in the group
    assert sorted(observed) == sorted(e.id for e in sent)  # a non-member sees everything


async def test_a_bus_runs_with_the_streams_limits_and_only_set_up_changes_them(
    bus_factory: BusFactory, nats_server: NatsServer
) -> None:
    """A service whose settings describe another layout binds and changes nothing; the NATS
    bootstrap's set-up brings the stream to its layout, once."""
    other = NatsSettings(url=nats_server.url, stream_max_age_s=3600.0)
    bus = await bus_factory("service", settings=other)
    info = await bus.js.stream_info("CDO")
    assert info.config.max_age == 7 * 24 * 3600.0
    assert (await jetstream.set_up(bus.js, other)) == jetstream.SetUp(
        stream="updated", bucket="kept"
    )
    assert (await jetstream.set_up(bus.js, other)).stream == "kept"
    info = await bus.js.stream_info("CDO")
    assert info.config.max_age == 3600.0
    assert info.config.subjects == ["cdo.v1.>"]
    bucket = await bus.js.key_value("cdo-snapshots")
    assert (await bucket.status()).history == 1


def missing(bus: EventBus) -> bool:
    return bus.jetstream_missing


async def test_a_bus_without_stream_or_bucket_degrades_and_binds_once_they_are_made(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """No NATS bootstrap yet: events go out unacknowledged and snapshots are unavailable,
    each said once; once the stream and the bucket are made, the bus binds to them."""
    caplog.set_level(logging.INFO, logger="cdo.bus")
    server = NatsServer(store_dir=tmp_path / "bare")
    server.start()
    bus = EventBus(
        NatsSettings(url=server.url, max_reconnect_attempts=1),
        service="early",
        instance="0",
        metrics=Metrics(),
        tracer=TracerProvider().get_tracer("test"),
    )
    try:
        await bus.connect()
        await bus.ensure_jetstream()
        assert missing(bus)
        with pytest.raises(BusUnavailableError):
            await bus.snapshots()
        await bus.ensure_jetstream()
        said = [r.getMessage() for r in caplog.records]
        assert (
            said.count(
                "no snapshot bucket: snapshots are not kept until the NATS bootstrap makes it"
            )
            == 1
        )
        assert sum(m.startswith("no event stream") for m in said) == 1
        await asyncio.to_thread(server.set_up_jetstream)
        await bus.ensure_jetstream()
        assert not missing(bus)
        assert await bus.snapshots() == []
    finally:
        await bus.close()
        server.stop()


async def test_duplicate_event_ids_are_stored_once(bus_factory: BusFactory) -> None:
    bus = await bus_factory("dup")
    event = NodeRecovered(node="dup")
    await bus.publish(event)
    await bus.publish(event)
    await bus.flush()

    async def stored() -> int | None:
        info = await bus.js.stream_info("CDO")
        return info.state.messages or None

    assert await wait_for(stored, what="stream state") == 1


def test_node_capacity_is_part_of_the_public_events() -> None:
    assert NodeCapacity(node="n", slot=0, gpus_total=4, gpus_free=4).gpus_free == 4


@pytest.mark.parametrize("pattern", ["cdo.v1.node.*.fault", "cdo.v1.node.n1.*"])
async def test_subject_patterns_select(bus_factory: BusFactory, pattern: str) -> None:
    bus = await bus_factory("patterns")
    got: list[Event] = []

    async def on_event(event: Event) -> None:
        got.append(event)

    await bus.subscribe(pattern, on_event)
    await bus.nc.flush()
    await bus.publish(NodeFault(node="n1", signal="xid", severity="fatal"))
    await bus.publish(NodeRecovered(node="n2"))
    await wait_for(lambda: got, what="matching event")
    await asyncio.sleep(0)  # let a wrongly matching message arrive, if any
    await bus.flush()
    assert [type(e) for e in got] == [NodeFault]


async def test_the_server_has_a_subscription_once_subscribe_returns(
    bus_factory: BusFactory, nats_server: NatsServer
) -> None:
    """Callers subscribe, then trigger what they wait for through another connection."""
    listener = await bus_factory("listener")

    async def ignore(_event: Event) -> None:
        return None

    await listener.subscribe("cdo.v1.node.*.fault", ignore)
    # A blocking read, on purpose: the client's event loop gets no turn to flush anything
    # that subscribe left in its buffer.
    url = f"http://{nats_server.host}:{nats_server.monitor_port}/subsz?subs=1"
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: ASYNC210 - see above
        subscriptions = json.loads(response.read())["subscriptions_list"]
    assert "cdo.v1.node.*.fault" in [entry["subject"] for entry in subscriptions]


async def _read_hmsg(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """The header block and payload of the next HMSG a raw protocol connection receives."""
    while True:
        line = await reader.readline()
        if line.startswith(b"HMSG "):
            header_size, total_size = map(int, line.split()[-2:])
            frame = await reader.readexactly(total_size + 2)
            return frame[:header_size], frame[header_size:total_size]


async def test_a_prepared_block_puts_the_same_bytes_on_the_wire_as_nats_py(
    nats_server: NatsServer,
) -> None:
    # Read by a raw protocol connection, so nothing in between parses or rebuilds the headers.
    reader, writer = await asyncio.open_connection(nats_server.host, nats_server.port)
    writer.write(b'CONNECT {"verbose":false,"headers":true}\r\nSUB wire.test 1\r\nPING\r\n')
    await writer.drain()
    while (await reader.readline()).strip() != b"PONG":
        pass
    headers = {
        "ce-specversion": "1.0",
        "ce-id": "  spaced\r\nid ",
        "Nats-Msg-Id": "m-1",
        "traceparent": "00-5b0c1f0e2b8a4b7e9a550d2d1f1c9b11-2f1c8a527d6b4cf1-01",
        "x-unicode": "grüße",
    }
    plain = await nats.connect(nats_server.url)
    prepared = BusClient()
    await prepared.connect(nats_server.url)
    try:
        await plain.publish("wire.test", b"{}", headers=headers)
        await plain.flush()
        expected = await asyncio.wait_for(_read_hmsg(reader), timeout=10)
        await prepared.publish_block("wire.test", wire.header_block(headers), b"{}")
        await prepared.flush()
        got = await asyncio.wait_for(_read_hmsg(reader), timeout=10)
    finally:
        await plain.close()
        await prepared.close()
        writer.close()
    assert got == expected
