"""Event bus throughput and latency next to raw nats-py, on one real nats-server.

Publisher and subscriber are separate processes, as services are. Every variant sends the same
bytes (the CloudEvent headers, a W3C ``traceparent`` and the JSON body of a ComputeDomain
membership event with 18 members) on the same subject, captured by the same JetStream stream,
and subscribes the same way (one plain subscription, nats-py's default pending limits, one
message handled at a time). Raw nats-py publishes prebuilt headers and its handler reads one
header. The cdo bus adds what a service really does: event encoding, CloudEvent headers, a
PRODUCER and a CONSUMER span, metrics, decoding into the typed event, the KV snapshot. "traced"
uses an SDK tracer provider that samples and records every span (no exporter attached); "not
sampled" uses the ALWAYS_OFF sampler, so only span contexts are made and propagated.

Throughput: a burst of --messages, rate measured at the subscriber from first to last arrival.
Latency: --latency-messages paced at --rate, publish -> handler entry (perf_counter is the
system-wide monotonic clock, so both processes read the same clock).

    python -m bench.bus [--messages 20000] [--latency-messages 2000] [--rate 1000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec
import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import SpanContext, TraceFlags

from bench._report import fixed, percentile, result_line
from shared import tracing
from shared.bus import EventBus, NatsSettings
from shared.bus import cloudevents as ce
from shared.events import DomainMember, DomainMembershipChanged, Event
from shared.metrics import Metrics
from sim.natsserver import NatsServer

BURST_DONE = "bench.control.burst-done"

VARIANTS = {
    "raw": "raw nats-py",
    "bus": "cdo bus (traced)",
    "bus-unsampled": "cdo bus (not sampled)",
}
ROWS = {
    "raw": "nats-py publish of prebuilt headers+body -> callback reads ce-id",
    "bus": "EventBus.publish -> EventBus.subscribe, every span sampled and recorded",
    "bus-unsampled": "the same, ALWAYS_OFF sampler: trace context propagated, no span recorded",
}


def sample_event() -> DomainMembershipChanged:
    members = tuple(
        DomainMember(
            node=f"gb200-r1-n{slot:02d}", index=slot, address=f"127.0.1.{slot + 1}", pods=1, gpus=4
        )
        for slot in range(18)
    )
    return DomainMembershipChanged(
        namespace="default",
        name="training-domain-1",
        uid="5b0c1f0e-2b8a-4b7e-9a55-0d2d1f1c9b11",
        generation=3,
        phase="Ready",
        clique="2f1c8a52-7d6b-4cf1-9e0a-56c3c9e0b1a4.1",
        channel=7,
        size=18,
        members=members,
        source="cdo/bench/publisher",
    )


def raw_message(event: Event) -> tuple[dict[str, str], bytes]:
    """The headers and body the bus sends for ``event``, with a fixed but valid traceparent, so
    raw nats-py moves and parses exactly the bytes the bus does."""
    headers, payload = ce.encode(event)
    headers["traceparent"] = tracing.format_traceparent(
        SpanContext(
            trace_id=0x5B0C1F0E2B8A4B7E9A550D2D1F1C9B11,
            span_id=0x2F1C8A527D6B4CF1,
            is_remote=False,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
    )
    return headers, payload


class Tally:
    """What the subscriber observes; message tags are ``b`` (burst) or ``l:<sent perf_counter>``."""

    def __init__(self, *, messages: int, latency_messages: int) -> None:
        self.messages = messages
        self.latency_messages = latency_messages
        self.burst = 0
        self.first = 0.0
        self.last = 0.0
        self.latencies: list[float] = []
        self.burst_done = asyncio.Event()
        self.done = asyncio.Event()

    def see(self, tag: str) -> None:
        now = time.perf_counter()
        if tag.startswith("l:"):
            self.latencies.append(now - float(tag[2:]))
        else:
            self.burst += 1
            if self.burst == 1:
                self.first = now
            self.last = now
        if self.burst >= self.messages:
            self.burst_done.set()
            if len(self.latencies) >= self.latency_messages:
                self.done.set()

    def result(self) -> dict[str, float]:
        return {
            "rate": (self.messages - 1) / (self.last - self.first),
            "p50": percentile(self.latencies, 0.5),
            "p99": percentile(self.latencies, 0.99),
        }


def make_bus(url: str, name: str, *, sampled: bool) -> EventBus:
    provider = TracerProvider() if sampled else TracerProvider(sampler=ALWAYS_OFF)
    return EventBus(
        NatsSettings(url=url),
        service=name,
        instance="bench",
        metrics=Metrics(),
        tracer=provider.get_tracer("bench"),
    )


async def subscriber(args: argparse.Namespace) -> None:
    tally = Tally(messages=args.messages, latency_messages=args.latency_messages)
    subject = sample_event().subject()
    if args.variant == "raw":
        nc = await nats.connect(args.url)

        async def on_message(msg: Msg) -> None:
            tally.see((msg.headers or {})["ce-id"])

        # nats-py's default pending limits, as the bus subscribes with: the burst fits in them.
        await nc.subscribe(subject, cb=on_message)
        await nc.flush()
    else:
        bus = make_bus(args.url, "bench-subscriber", sampled=args.variant == "bus")
        await bus.connect()

        async def on_event(event: Event) -> None:
            tally.see(event.id)

        await bus.subscribe(subject, on_event)
        await bus.nc.flush()
    control = await nats.connect(args.url)
    print("ready", flush=True)
    # The latency phase starts only once the burst is fully handled, so paced messages do not
    # queue behind it.
    await asyncio.wait_for(tally.burst_done.wait(), timeout=300)
    await control.publish(BURST_DONE, b"")
    await control.flush()
    await asyncio.wait_for(tally.done.wait(), timeout=300)
    await control.close()
    print(json.dumps(tally.result()), flush=True)


async def wait_burst_done(url: str) -> tuple[Client, asyncio.Event]:
    control = await nats.connect(url)
    drained = asyncio.Event()

    async def on_done(_msg: Msg) -> None:
        drained.set()

    await control.subscribe(BURST_DONE, cb=on_done)
    await control.flush()
    return control, drained


async def publisher(args: argparse.Namespace) -> None:
    template = sample_event()
    pace = 1 / args.rate
    control, drained = await wait_burst_done(args.url)
    if args.variant == "raw":
        headers, payload = raw_message(template)
        subject = template.subject()
        nc = await nats.connect(args.url)
        for _ in range(args.messages):
            await nc.publish(subject, payload, headers={**headers, "ce-id": "b"})
        await nc.flush()
        await asyncio.wait_for(drained.wait(), timeout=300)
        start = time.perf_counter()
        for n in range(args.latency_messages):
            await asyncio.sleep(max(0.0, start + n * pace - time.perf_counter()))
            tag = f"l:{time.perf_counter()!r}"
            await nc.publish(subject, payload, headers={**headers, "ce-id": tag})
        await nc.flush()
        await nc.close()
        await control.close()
        return
    bus = make_bus(args.url, "bench-publisher", sampled=args.variant == "bus")
    await bus.connect()
    await bus.ensure_jetstream()
    runner = asyncio.create_task(bus.run())
    burst = [msgspec.structs.replace(template, id="b") for _ in range(args.messages)]
    for event in burst:
        await bus.publish(event)
    await bus.flush()
    await asyncio.wait_for(drained.wait(), timeout=300)
    start = time.perf_counter()
    for n in range(args.latency_messages):
        await asyncio.sleep(max(0.0, start + n * pace - time.perf_counter()))
        await bus.publish(msgspec.structs.replace(template, id=f"l:{time.perf_counter()!r}"))
    await bus.flush()
    runner.cancel()
    await asyncio.gather(runner, return_exceptions=True)
    await bus.close()
    await control.close()


def run_pair(args: argparse.Namespace, url: str, variant: str) -> dict[str, float]:
    common = [
        "--url", url, "--variant", variant,
        "--messages", str(args.messages), "--latency-messages", str(args.latency_messages),
        "--rate", str(args.rate),
    ]  # fmt: skip
    me = [sys.executable, "-m", "bench.bus"]
    sub = subprocess.Popen(
        [*me, "--role", "subscriber", *common], stdout=subprocess.PIPE, text=True
    )
    assert sub.stdout is not None
    if sub.stdout.readline().strip() != "ready":
        raise RuntimeError("subscriber did not start")
    subprocess.run([*me, "--role", "publisher", *common], check=True, timeout=300)
    line = sub.stdout.readline()
    if sub.wait(timeout=300) != 0 or not line:
        raise RuntimeError(f"subscriber failed for {variant}")
    result: dict[str, float] = json.loads(line)
    return result


def best_of(results: list[dict[str, float]]) -> dict[str, float]:
    """Best throughput and median latencies over the rounds, to damp a noisy 2-core machine."""
    return {
        "rate": max(r["rate"] for r in results),
        "p50": statistics.median(r["p50"] for r in results),
        "p99": statistics.median(r["p99"] for r in results),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--messages", type=int, default=20_000, help="burst size for throughput")
    parser.add_argument("--latency-messages", type=int, default=2_000)
    parser.add_argument("--rate", type=float, default=1_000, help="paced rate for latency (msg/s)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--role", choices=["subscriber", "publisher"], help=argparse.SUPPRESS)
    parser.add_argument("--variant", choices=list(VARIANTS), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "subscriber":
        asyncio.run(subscriber(args))
        return
    if args.role == "publisher":
        asyncio.run(publisher(args))
        return

    results: dict[str, list[dict[str, float]]] = {variant: [] for variant in VARIANTS}
    with tempfile.TemporaryDirectory() as store, NatsServer(store_dir=Path(store)) as server:
        server.set_up_jetstream()  # as the NATS bootstrap does at install
        for _ in range(args.rounds):  # interleaved, so load changes hit every variant alike
            for variant in VARIANTS:
                results[variant].append(run_pair(args, server.url, variant))
    summary = {variant: best_of(runs) for variant, runs in results.items()}
    raw, bus = summary["raw"], summary["bus"]
    payload = len(ce.encode(sample_event())[1])
    headers = len(raw_message(sample_event())[0])
    print(
        f"payload {payload} B JSON + {headers} headers (CloudEvent, Nats-Msg-Id, traceparent), the "
        f"same bytes in every row; burst of {args.messages}; latency over "
        f"{args.latency_messages} msgs at {args.rate:.0f}/s; best of {args.rounds} rounds"
    )
    print(
        "events/s: subscriber-side rate over the burst, first to last arrival; p50/p99: publish "
        "-> handler entry at the paced rate"
    )
    print(f"{'':24}{'events/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'vs raw':>8}")
    for variant, title in VARIANTS.items():
        r = summary[variant]
        print(
            f"{title:24}{r['rate']:10.0f}{r['p50'] * 1e3:9.3f}{r['p99'] * 1e3:9.3f}"
            f"{r['rate'] / raw['rate']:8.2f}  {ROWS[variant]}"
        )
    unsampled = summary["bus-unsampled"]
    print(
        result_line(
            [
                ("raw_events_per_s", fixed(raw["rate"], 0)),
                ("bus_events_per_s", fixed(bus["rate"], 0)),
                ("ratio", fixed(bus["rate"] / raw["rate"], 2)),
                ("bus_unsampled_events_per_s", fixed(unsampled["rate"], 0)),
                ("unsampled_ratio", fixed(unsampled["rate"] / raw["rate"], 2)),
                ("raw_p50_ms", fixed(raw["p50"] * 1e3, 3)),
                ("raw_p99_ms", fixed(raw["p99"] * 1e3, 3)),
                ("bus_p50_ms", fixed(bus["p50"] * 1e3, 3)),
                ("bus_p99_ms", fixed(bus["p99"] * 1e3, 3)),
            ]
        )
    )


if __name__ == "__main__":
    main()
