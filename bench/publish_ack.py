"""What the stream's acknowledgement costs a publisher: ``EventBus.publish`` per event with
the outbox (each event kept until its PubAck) and without it (``jetstream=False``, a plain
publish), in one process against a real nats-server with JetStream.

Each round publishes a burst of ``--events`` ``NodeRecovered`` events and stops the clock when
the server has them all and, with acks, when the last is acknowledged; the rounds alternate.

    python -m bench.publish_ack [--events 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider

from shared.bus import EventBus, NatsSettings
from shared.events import NodeRecovered
from shared.metrics import Metrics
from sim.natsserver import NatsServer


async def per_event_us(url: str, *, acked: bool, events: int) -> float:
    bus = EventBus(
        NatsSettings(url=url, jetstream=acked),
        service="bench",
        instance="publisher",
        metrics=Metrics(),
        tracer=TracerProvider().get_tracer("bench"),
    )
    await bus.connect()
    await bus.ensure_jetstream()
    if acked and bus.jetstream_missing:
        raise RuntimeError("no event stream: acknowledged publishing cannot be measured")
    burst = [NodeRecovered(node=f"n{i % 50}") for i in range(events)]
    start = time.perf_counter()
    for event in burst:
        await bus.publish(event)
    await bus.flush()
    if not await bus.acknowledged(60):
        raise RuntimeError(f"{bus.unacknowledged} events unacknowledged")
    took = time.perf_counter() - start
    await bus.close()
    return took / events * 1e6


async def main(events: int, rounds: int) -> None:
    results: dict[str, list[float]] = {"plain": [], "acked": []}
    with tempfile.TemporaryDirectory() as store, NatsServer(store_dir=Path(store)) as server:
        server.set_up_jetstream()  # as the NATS bootstrap does at install
        for _ in range(rounds):
            results["plain"].append(await per_event_us(server.url, acked=False, events=events))
            results["acked"].append(await per_event_us(server.url, acked=True, events=events))
    for name, values in results.items():
        print(
            f"{name:6} best {min(values):6.1f} us/event  median {statistics.median(values):6.1f}"
            f" us/event  ({events} events, {rounds} rounds)"
        )
    plain, acked = (statistics.median(results[name]) for name in ("plain", "acked"))
    print(
        f"RESULT plain_publish_us={plain:.1f} acked_publish_us={acked:.1f} "
        f"ack_overhead_us={acked - plain:.1f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.events, args.rounds))
