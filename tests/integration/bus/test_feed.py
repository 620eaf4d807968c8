"""A service's bus (run) against a real nats-server that is not there yet, then comes, goes
and comes back with an empty store: subscriptions made before the first connection take effect,
and once the NATS bootstrap has made the bucket again it gets the service's latest snapshots."""

from __future__ import annotations

import asyncio
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider

from shared.bus import EventBus, NatsSettings
from shared.events import Event, NodeImexState
from shared.events.subjects import NODE_IMEX_SNAPSHOT
from shared.metrics import Metrics
from sim.natsserver import NatsServer
from tests.conftest import BusFactory
from tests.support.tasks import running
from tests.support.wait import wait_for

FAST = {"reconnect_wait_s": 0.1, "reconnect_max_wait_s": 0.3}


def service_bus(url: str, name: str = "svc") -> EventBus:
    return EventBus(
        NatsSettings(url=url, **FAST),  # type: ignore[arg-type]
        service=name,
        instance="i",
        metrics=Metrics(),
        tracer=TracerProvider().get_tracer("test"),
    )


async def test_a_subscription_made_before_nats_exists_receives_once_it_does(
    tmp_path: Path, bus_factory: BusFactory
) -> None:
    late = NatsServer(store_dir=tmp_path / "late")
    bus = service_bus(late.url)
    received: list[Event] = []

    async def on_event(event: Event) -> None:
        received.append(event)

    subscription = await bus.subscribe("cdo.v1.node.*.imex", on_event)
    assert not bool(subscription.active)  # no connection yet: recorded
    try:
        async with running(bus.run()):
            late.start()
            await wait_for(lambda: bus.feed_up, timeout=20, what="the feed up")
            assert subscription.active
            publisher = await bus_factory(settings=NatsSettings(url=late.url))
            await publisher.publish(NodeImexState(node="n1", daemon_state="READY"))
            await wait_for(lambda: len(received) == 1, what="the event")
        await bus.stop_intake()
        await bus.close()
    finally:
        late.stop()


async def test_after_nats_comes_back_with_an_empty_store_the_bucket_has_the_snapshots(
    tmp_path: Path,
) -> None:
    server = NatsServer(store_dir=tmp_path / "first")
    server.start()
    server.set_up_jetstream()
    bus = service_bus(server.url)
    key = NODE_IMEX_SNAPSHOT.render(node="n1")
    try:
        async with running(bus.run()):
            await wait_for(lambda: bus.feed_up, timeout=20, what="the feed up")
            await bus.publish(NodeImexState(node="n1", daemon_state="READY"))
            await wait_for(lambda: bus.snapshots(key), what="the snapshot")
            server.stop()
            await wait_for(lambda: not bus.is_connected, what="the loss noticed")
            # Same port, a new store: no stream, no bucket, no snapshot, until the NATS
            # bootstrap runs again (the bus never makes them).
            server = NatsServer(store_dir=tmp_path / "second", port=server.port)
            server.start()
            await wait_for(lambda: bus.feed_up, timeout=20, what="the feed up again")
            assert bus.jetstream_missing
            await asyncio.to_thread(server.set_up_jetstream)

            async def latest() -> str | None:
                if not bus.feed_up:
                    return None
                found = [e for e in await bus.snapshots(key) if isinstance(e, NodeImexState)]
                return found[0].daemon_state if found else None

            state = await wait_for(latest, timeout=30, what="the snapshot written again")
            assert state == "READY"  # what this bus published last, written again
        await bus.close()
    finally:
        server.stop()
