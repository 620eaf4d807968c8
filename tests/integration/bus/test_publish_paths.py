"""Both ways the bus publishes a prepared header block arrive the same on a real nats-server:
the hook into nats-py's internals (the installed nats-py) and the fallback of plain header
dicts, which the bus takes where a nats-py release no longer has the hooks."""

from __future__ import annotations

import asyncio

import nats
from nats.aio.msg import Msg

from shared.bus import cloudevents as ce
from shared.bus import wire
from shared.bus.client import PREPARED_PUBLISH, BusClient
from shared.bus.kinds import Kind
from shared.events import NodeFault
from sim.natsserver import NatsServer


async def test_the_prepared_block_and_the_fallback_deliver_the_same_message(
    nats_server: NatsServer,
) -> None:
    assert PREPARED_PUBLISH  # else only the fallback would be compared with itself
    event = NodeFault(
        node="node-a", signal="xid", severity="fatal", code=74, message="é ünïcode",
        source="cdo/health-monitor/i0",
    )  # fmt: skip
    # The block EventBus.publish writes: the kind's fixed headers, then the event's own.
    block = Kind(NodeFault).place(event).block_start + ce.event_header_lines(event).encode()
    block += wire.END
    _, payload = ce.encode(event)

    received: asyncio.Queue[Msg] = asyncio.Queue()
    reader = await nats.connect(nats_server.url)

    async def receive(message: Msg) -> None:
        await received.put(message)

    await reader.subscribe("test.paths", cb=receive)
    await reader.flush()
    arrived = []
    try:
        for prepared in (True, False):
            client = BusClient(prepared=prepared)
            await client.connect(servers=[nats_server.url])
            try:
                await client.publish_block("test.paths", block, payload)
                await client.flush()
            finally:
                await client.close()
            arrived.append(await asyncio.wait_for(received.get(), timeout=5))
    finally:
        await reader.close()

    via_hook, via_dicts = arrived
    assert via_hook.data == via_dicts.data == payload
    assert via_hook.headers == via_dicts.headers
    assert ce.decode(ce.lowercase_headers(via_dicts.headers), via_dicts.data) == event
