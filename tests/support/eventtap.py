"""A consumer service that prints every cdo event it receives as one JSON line on stdout.

Live events by default; ``--replay`` reads the JetStream history first (with stream sequence
numbers) and ``--snapshots`` prints the KV snapshot of current state before anything else.
Each line carries the trace id of the CONSUMER span, so tests can follow traces.

    CDO_NATS_URL=nats://127.0.0.1:4222 python -m tests.support.eventtap --snapshots --replay
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import msgspec

from shared import tracing
from shared.bus import Delivery, StartAt
from shared.events import Event
from shared.events.subjects import ALL_EVENTS
from shared.runtime import ServiceContext, run_service

_encoder = msgspec.json.Encoder()


def emit(kind: str, event: Event, **extra: Any) -> None:
    line = {"kind": kind, "type": event.ce_type(), "event": event, **extra}
    sys.stdout.write(_encoder.encode(line).decode() + "\n")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description="Print cdo events as JSON lines.")
    parser.add_argument("--subject", default=ALL_EVENTS, help="subject pattern")
    parser.add_argument("--queue", default=None, help="queue group (replicas split messages)")
    parser.add_argument("--replay", action="store_true", help="replay the stream history first")
    parser.add_argument("--snapshots", action="store_true", help="print KV snapshots first")
    args = parser.parse_args()

    async def on_event(event: Event) -> None:
        emit("live", event, subject=event.subject(), trace_id=tracing.current_trace_id())

    async def on_delivery(delivery: Delivery) -> None:
        emit(
            "stream",
            delivery.event,
            subject=delivery.subject,
            sequence=delivery.stream_sequence,
            trace_id=tracing.current_trace_id(),
        )

    async def setup(ctx: ServiceContext) -> None:
        if args.snapshots:
            for event in await ctx.bus.snapshots():
                emit("snapshot", event)
        if args.replay:
            await ctx.bus.consume(on_delivery, subject=args.subject, start=StartAt())
        else:
            await ctx.bus.subscribe(args.subject, on_event, queue=args.queue)
        print('{"kind": "ready"}', flush=True)

    raise SystemExit(run_service("eventtap", setup))


if __name__ == "__main__":
    main()
