"""A task cancelled while the bus talks to NATS ends cancelled, wherever the cancel lands.

nats-py swallows a CancelledError that arrives while it flushes (connecting and JetStream
requests flush too); the bus raises it again (shared/bus/cancellation.py). The cancel is sent
after a sweep of delays so that some land inside those calls. A connection made as the cancel
landed is closed all the same: the server is left with none.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import urllib.request

import pytest
from nats.aio.msg import Msg
from opentelemetry.sdk.trace import TracerProvider

from shared.bus import EventBus, NatsSettings
from shared.metrics import Metrics
from sim.natsserver import NatsServer
from tests.conftest import BusFactory
from tests.support.wait import wait_for

DELAYS_MS = [step / 4 for step in range(80)]


async def test_a_bus_cancelled_at_any_moment_of_its_start_ends_cancelled(
    nats_server: NatsServer,
) -> None:
    started = asyncio.Event()

    async def start_and_serve() -> None:
        bus = EventBus(
            NatsSettings(url=nats_server.url, reconnect_wait_s=0.1),
            service="cancel-test",
            instance="i",
            metrics=Metrics(),
            tracer=TracerProvider().get_tracer("test"),
        )
        try:
            await bus.connect()
            await bus.ensure_jetstream()
            await bus.flush()
            started.set()
            await asyncio.Event().wait()
        finally:
            await bus.close()

    for delay_ms in DELAYS_MS:
        task = asyncio.create_task(start_and_serve())
        await asyncio.sleep(delay_ms / 1000)
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=10)
        assert done, f"a cancel {delay_ms} ms into the start was swallowed: the task runs on"
        with pytest.raises(asyncio.CancelledError):
            task.result()
    # And once the start has completed: the serving task ends cancelled too.
    task = asyncio.create_task(start_and_serve())
    await wait_for(started.is_set, timeout=10, what="a start that completes")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    await wait_for(
        lambda: _open_connections(nats_server) == 0,
        timeout=10,
        what="every cancelled start's connection closed",
    )


async def test_a_flush_cancelled_while_it_waits_for_its_pong_leaves_the_connection_reading(
    bus_factory: BusFactory,
) -> None:
    # nats-py sets the result of the first queued PONG future when a PONG arrives; a cancelled
    # one raised InvalidStateError in its read loop, which then stopped for good: the connection
    # looked connected and received nothing more.
    bus = await bus_factory()
    received: asyncio.Queue[bytes] = asyncio.Queue()

    async def receive(message: Msg) -> None:
        await received.put(message.data)

    await bus.nc.subscribe("test.alive", cb=receive)
    for yields in range(12):
        flush = asyncio.create_task(bus.flush())
        for _ in range(yields):
            await asyncio.sleep(0)
        flush.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await flush
        await bus.nc.publish("test.alive", str(yields).encode())
        got = await asyncio.wait_for(received.get(), timeout=5)
        assert got == str(yields).encode(), f"read loop lost after a cancel {yields} yields in"


async def test_a_close_cut_short_at_any_moment_leaves_no_connection_open(
    nats_server: NatsServer,
) -> None:
    # nats-py marks a client closed before it closes the socket, and every later close is then
    # a no-op: a close cancelled in between (a caller's timeout) left the socket open until the
    # event loop was gone. The cancel lands a growing number of yields into the close (at
    # least one: a task cancelled before it first runs never starts its close).
    for yields in range(1, 16):
        bus = EventBus(
            NatsSettings(url=nats_server.url, reconnect_wait_s=0.1),
            service="close-test",
            instance=str(yields),
            metrics=Metrics(),
            tracer=TracerProvider().get_tracer("test"),
        )
        await bus.connect()
        await bus.nc.subscribe("test.close")
        closing = asyncio.create_task(bus.close())
        for _ in range(yields):
            await asyncio.sleep(0)
        closing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await closing
        await wait_for(
            lambda: _open_connections(nats_server) == 0,
            timeout=10,
            what=f"the connection of a close cancelled {yields} yields in closed",
        )


def _open_connections(server: NatsServer) -> int:
    url = f"http://127.0.0.1:{server.monitor_port}/connz"
    with urllib.request.urlopen(url, timeout=5) as reply:
        return int(json.load(reply)["num_connections"])
