"""The domain controller without NATS: a real process started while no nats-server answers is
ready, leads and serves a domain from the API; when NATS comes (same port) the domain's
membership reaches the stream and its snapshot; a SIGTERM while NATS is down again is prompt."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider

from shared.bus import EventBus, NatsSettings
from shared.errors import BusUnavailableError
from shared.events import DomainMembershipChanged
from shared.events.subjects import DOMAIN_SNAPSHOT
from shared.metrics import Metrics
from sim.natsserver import NatsServer
from tests.support.wait import wait_for

from .cluster import NAMESPACE, Cluster
from .conftest import ControllerFactory, http_get

STOP_PROMPTLY_S = 5.0


async def test_it_leads_without_nats_and_catches_up_when_nats_comes(
    cluster: Cluster, start_controller: ControllerFactory, tmp_path: Path
) -> None:
    late = NatsServer(store_dir=tmp_path / "late-nats")
    controller = start_controller(
        "dc-dark", CDO_NATS_URL=late.url, CDO_NATS_RECONNECT_MAX_WAIT_S="0.5"
    )
    await controller.wait_ready()
    status, body = http_get(controller.port, "/readyz")
    assert (status, json.loads(body)["degraded"]) == (200, ["nats"])

    await cluster.create_domain("dark", "dark-rct")
    await wait_for(lambda: cluster.template("dark-rct"), what="the template, without NATS")
    condition = await wait_for(
        lambda: cluster.condition("dark", "Ready"), what="the domain's status, without NATS"
    )
    assert condition.reason == "WaitingForPlacement"

    late.start()
    # The NATS bootstrap makes the stream and the bucket; the controller only binds to them.
    await asyncio.to_thread(late.set_up_jetstream)
    reader = EventBus(
        NatsSettings(url=late.url, max_reconnect_attempts=1),
        service="test",
        instance="reader",
        metrics=Metrics(),
        tracer=TracerProvider().get_tracer("test"),
    )
    try:

        async def snapshot() -> DomainMembershipChanged | None:
            if not reader.is_connected:
                await reader.connect()
            key = DOMAIN_SNAPSHOT.render(namespace=NAMESPACE, name="dark")
            try:
                events = await reader.snapshots(key)
            except BusUnavailableError:  # the reader's feed is not set up yet
                return None
            found = [e for e in events if isinstance(e, DomainMembershipChanged)]
            return found[0] if found else None

        event = await wait_for(snapshot, timeout=30, what="the domain's snapshot once NATS came")
        assert event.phase == "Pending"
        await wait_for(
            lambda: json.loads(http_get(controller.port, "/readyz")[1])["degraded"] == [],
            what="the feed up",
        )
    finally:
        await reader.close()

    late.stop()
    await wait_for(
        lambda: json.loads(http_get(controller.port, "/readyz")[1])["degraded"] == ["nats"],
        what="the feed down again",
    )
    controller.process.send(signal.SIGTERM)
    started = time.monotonic()
    assert controller.process.wait(timeout=20) == 0
    assert time.monotonic() - started < STOP_PROMPTLY_S
