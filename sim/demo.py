"""``./task demo``: the cdo story on the simulated cluster, end to end in one terminal.

Today it shows the foundation every service stands on: a real nats-server with JetStream, a
producer service publishing a ComputeDomain's life as CloudEvents (capacity, placement, IMEX
state, a fatal XID and the recovery), a consumer service receiving them in another process, the
JetStream history, the KV snapshot a late subscriber starts from, and both services' metrics. It
grows into the full story (API emulator, simulated racks, the four services) as they land.

    ./task demo                 # run the story and stop everything
    ./task demo -- --keep       # leave NATS running afterwards and print how to connect
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import msgspec
from opentelemetry.sdk.trace import TracerProvider

from shared.bus import EventBus, NatsSettings
from shared.events import Event
from shared.events.describe import describe
from shared.events.registry import UNION_DECODER
from shared.metrics import Metrics
from sim.eventgen import story
from sim.natsserver import NatsServer, free_port

BOLD, DIM, RESET = ("\033[1m", "\033[2m", "\033[0m") if sys.stdout.isatty() else ("", "", "")


class TapLine(msgspec.Struct):
    kind: str
    event: msgspec.Raw = msgspec.Raw(b"null")
    subject: str = ""
    trace_id: str | None = None


def start(module: str, *args: str, env: dict[str, str], logs: Path) -> subprocess.Popen[bytes]:
    name = module.rsplit(".", 1)[-1]
    return subprocess.Popen(
        [sys.executable, "-m", module, *args],
        stdout=subprocess.PIPE,
        stderr=(logs / f"{name}.log").open("wb"),
        env={**os.environ, **env},
    )


def metric(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith((name + "{", name + " "))
    )


async def read_history(url: str) -> tuple[int, list[Event]]:
    bus = EventBus(
        NatsSettings(url=url),
        service="demo",
        instance="reader",
        metrics=Metrics(),
        tracer=TracerProvider().get_tracer("demo"),
    )
    await bus.connect()
    try:
        info = await bus.js.stream_info("CDO")
        return info.state.messages, await bus.snapshots()
    finally:
        await bus.close()


def run(args: argparse.Namespace) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="cdo-demo-"))
    server = NatsServer(store_dir=workdir / "nats")
    print(f"{BOLD}cdo demo{RESET} {DIM}(work dir {workdir}){RESET}")
    started = time.monotonic()
    processes: list[subprocess.Popen[bytes]] = []
    try:
        return _story(args, server=server, workdir=workdir, started=started, processes=processes)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
        server.stop()


def _story(
    args: argparse.Namespace,
    *,
    server: NatsServer,
    workdir: Path,
    started: float,
    processes: list[subprocess.Popen[bytes]],
) -> int:
    steps = len(list(story()))
    server.start()
    print(f"  nats-server with JetStream on {server.url}")
    producer_port, consumer_port = free_port(), free_port()
    common = {"CDO_NATS_URL": server.url, "CDO_HTTP_HOST": "127.0.0.1"}
    consumer = start(
        "sim.eventtap", env={**common, "CDO_HTTP_PORT": str(consumer_port)}, logs=workdir
    )
    processes.append(consumer)
    assert consumer.stdout is not None
    consumer.stdout.readline()  # "ready": subscribed before anything is published
    producer = start(
        "sim.eventgen",
        "--count", str(steps), "--interval", str(args.interval),
        env={**common, "CDO_HTTP_PORT": str(producer_port)},
        logs=workdir,
    )  # fmt: skip
    processes.append(producer)
    print(f"  producer service pid {producer.pid}, consumer service pid {consumer.pid}")
    print(f"\n{BOLD}events as the consumer receives them{RESET}")
    traces: set[str] = set()
    for _ in range(steps):
        line = msgspec.json.decode(consumer.stdout.readline(), type=TapLine)
        event: Event = UNION_DECODER.decode(line.event)
        if line.trace_id:
            traces.add(line.trace_id)
        stamp = time.monotonic() - started
        print(f"  {DIM}{stamp:6.2f}s{RESET} {describe(event)}")
        print(f"          {DIM}{line.subject}{RESET}")

    stored, snapshots = asyncio.run(read_history(server.url))
    print(f"\n{BOLD}what a subscriber starting now would read first (KV snapshots){RESET}")
    for event in sorted(snapshots, key=lambda e: e.subject()):
        print(f"  {describe(event)}")
    published = metric(producer_port, "cdo_bus_messages_published_total")
    received = metric(consumer_port, "cdo_bus_messages_received_total")
    dropped = metric(consumer_port, "cdo_bus_messages_dropped_total")

    codes = {}
    for name, process in (("producer", producer), ("consumer", consumer)):
        process.send_signal(signal.SIGTERM)
        codes[name] = process.wait(timeout=30)
    print(f"\n{BOLD}summary{RESET}")
    print(f"  events published {published:.0f}, received {received:.0f}, dropped {dropped:.0f}")
    print(f"  JetStream stream CDO holds {stored} events; {len(snapshots)} snapshot keys")
    print(f"  {len(traces)} traces, one per publish; e.g. trace id {sorted(traces)[0]}")
    print(f"  services stopped with SIGTERM: exit codes {codes}")
    print(f"  logs in {workdir}")
    ok = all(code == 0 for code in codes.values()) and received == steps and dropped == 0
    if args.keep:
        print(
            f"\nNATS keeps running at {server.url}; try: CDO_NATS_URL={server.url} "
            f"python -m sim.eventtap --snapshots --replay   (Ctrl-C stops)"
        )
        wait_for_interrupt()
    return 0 if ok else 1


def wait_for_interrupt() -> None:
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description="Run the cdo demo on the simulated cluster.")
    parser.add_argument("--interval", type=float, default=0.3, help="seconds between events")
    parser.add_argument("--keep", action="store_true", help="leave the cluster running")
    raise SystemExit(run(parser.parse_args()))


if __name__ == "__main__":
    main()
