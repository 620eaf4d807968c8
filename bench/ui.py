"""How fast ``cdo ui`` paints, in a real headless Chromium (Debian's, driven by Playwright).

Everything runs as separate processes: the API emulator (``python -m sim.kubeapi``) with cdo's
CRDs, a nats-server with cdo's stream (made by the NATS bootstrap, as in an install), and ``cdo
ui`` (``python -m cli ui``). The cluster's objects are created directly in the emulator, as the
services would write them, without running per-node services: Nodes with their clique labels,
IMEX slot annotations and GPU capacity, one ComputeDomain and Placement per rack holding half
its GPUs.

- **event to paint** (2 racks, ``--events`` times): a ``NodeFault`` for one GPU is published on
  NATS (as the health monitor publishes it); the page's ``MutationObserver`` sees the GPU turn
  faulty and the time is taken at the next animation frame, on the same wall clock as the
  publish. A ``NodeRecovered`` clears it before the next one.
- **first paint** (``--racks`` racks, 256 by default: 4,608 trays, 18,432 GPUs): from the
  navigation to the racks drawn (the page's ``cdo-first-paint`` mark, set in the animation frame
  after the first whole drawing), ``--loads`` page loads.

    python -m bench.ui [--racks 256] [--events 40] [--loads 3]

Prints a table and ends with one ``RESULT`` line: ``ui_event_to_paint_p99_ms`` and
``ui_first_paint_ms_<N>racks``, named for the racks drawn (``ui_first_paint_ms_256racks`` at the
default size).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider

from bench._report import fixed, measure_table, result_line
from bench.controller import start_emulator
from bench.health import percentile
from shared.bus import EventBus, NatsSettings
from shared.crds import COMPUTE_DOMAINS, PLACEMENTS, install_crds
from shared.crds.names import (
    CLIQUE_LABEL,
    IMEX_CLIQUE_ANNOTATION,
    IMEX_SLOT_ANNOTATION,
    NVLINK_DOMAIN_LABEL,
)
from shared.events import NodeFault, NodeRecovered
from shared.kube.client import KubeClient
from shared.kube.resources import NAMESPACES, NODES
from shared.metrics import Metrics
from sim.natsserver import NatsServer
from tests.support.browser import FLAGS, executable

TRAYS = 18
GPUS = 4
NAMESPACE = "bench"
_URL = re.compile(rb"^cdo ui: (http://\S+)")


def rack_uuid(rack: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, f"bench-ui-rack-{rack}"))


async def create_racks(client: KubeClient, racks: int) -> None:
    """``racks`` NVL72 racks of Nodes, and per rack a domain holding half its GPUs."""
    await install_crds(client)
    await client.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    )
    limit = asyncio.Semaphore(16)

    async def node(rack: int, tray: int) -> None:
        clique = f"{rack_uuid(rack)}.1"
        name = f"rack-{rack}-tray{tray:02d}"
        async with limit:
            await client.create(
                NODES,
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": name,
                        "labels": {CLIQUE_LABEL: clique, NVLINK_DOMAIN_LABEL: rack_uuid(rack)},
                        "annotations": {
                            IMEX_CLIQUE_ANNOTATION: clique,
                            IMEX_SLOT_ANNOTATION: str(tray),
                        },
                    },
                },
            )
            ready = {"type": "Ready", "status": "True", "reason": "KubeletReady"}
            status = {"capacity": {"nvidia.com/gpu": str(GPUS)}, "conditions": [ready]}
            await client.patch(NODES, name, {"status": status}, subresource="status")

    async def domain(rack: int) -> None:
        name = f"train-{rack}"
        members = [
            {"node": f"rack-{rack}-tray{tray:02d}", "slot": tray, "gpus": GPUS}
            for tray in range(TRAYS // 2)
        ]
        async with limit:
            await client.create(
                COMPUTE_DOMAINS,
                {
                    "apiVersion": COMPUTE_DOMAINS.api_version,
                    "kind": "ComputeDomain",
                    "metadata": {"name": name, "namespace": NAMESPACE},
                    "spec": {"channel": {"resourceClaimTemplate": {"name": f"{name}-rct"}}},
                },
                namespace=NAMESPACE,
            )
            piece = {
                "index": 0,
                "clique": f"{rack_uuid(rack)}.1",
                "channel": 0,
                "size": len(members),
                "members": members,
            }
            await client.create(
                PLACEMENTS,
                {
                    "apiVersion": PLACEMENTS.api_version,
                    "kind": "Placement",
                    "metadata": {"name": name, "namespace": NAMESPACE},
                    "spec": {"gpusPerPod": GPUS, "size": len(members), "slices": [piece]},
                },
                namespace=NAMESPACE,
            )

    await asyncio.gather(*(node(r, t) for r in range(racks) for t in range(TRAYS)))
    await asyncio.gather(*(domain(r) for r in range(racks)))


@asynccontextmanager
async def cdo_ui(kubeconfig: Path, nats_url: str, tmp: Path) -> AsyncIterator[str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cli", "ui", "--port", "0", "--kubeconfig", str(kubeconfig),
        "--nats-url", nats_url, "--state-dir", str(tmp),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    assert process.stdout is not None
    try:
        line = await asyncio.wait_for(process.stdout.readline(), 60)
        found = _URL.match(line)
        if found is None:
            raise RuntimeError(f"cdo ui did not start: {line!r}")
        yield found.group(1).decode()
    finally:
        process.terminate()
        await process.wait()


@asynccontextmanager
async def browser() -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    chromium = executable()
    if chromium is None:
        raise SystemExit("bench.ui needs chromium: ./task tools:chromium, or set CDO_CHROMIUM")
    with tempfile.TemporaryDirectory(prefix="cdo-bench-chromium-") as profile:
        async with async_playwright() as playwright:
            context = await playwright.chromium.launch_persistent_context(
                profile,
                executable_path=str(chromium),
                headless=True,
                args=list(FLAGS),
                viewport={"width": 1600, "height": 1000},
            )
            try:
                yield context
            finally:
                await context.close()


WATCH_GPU = """([node, gpu]) => new Promise((resolve) => {
  const faulty = () => document.querySelector(
    `.tray[data-node="${node}"] .gpu[data-gpu="${gpu}"][data-state="faulty"]`);
  const done = () => requestAnimationFrame(() => resolve(Date.now()));
  if (faulty()) { done(); return; }
  const observer = new MutationObserver(() => {
    if (faulty()) { observer.disconnect(); done(); }
  });
  const racks = document.getElementById("racks");
  observer.observe(racks, {subtree: true, childList: true, attributes: true});
})"""


async def event_to_paint(page: Any, bus: EventBus, *, events: int, racks: int) -> list[float]:
    latencies = []
    rng = random.Random(7)
    for _ in range(events):
        node = f"rack-{rng.randrange(racks)}-tray{rng.randrange(TRAYS):02d}"
        gpu = rng.randrange(GPUS)
        painted = asyncio.create_task(page.evaluate(WATCH_GPU, [node, gpu]))
        await asyncio.sleep(0.05)  # the observer is in place before the event goes out
        sent = time.time() * 1000
        await bus.publish(
            NodeFault(node=node, signal="xid", code=79, severity="fatal", gpu_index=gpu,
                      message=f"GPU {gpu}: XID 79", time=datetime.now(UTC))
        )  # fmt: skip
        latencies.append(await asyncio.wait_for(painted, 30) - sent)
        await bus.publish(NodeRecovered(node=node, time=datetime.now(UTC)))
        await page.wait_for_selector(
            f'.tray[data-node="{node}"] .gpu[data-gpu="{gpu}"]:not([data-state="faulty"])',
            timeout=30_000,
        )
    return latencies


async def first_paint(page: Any, url: str, *, loads: int) -> list[float]:
    times = []
    for _ in range(loads):
        await page.goto(url)
        await page.wait_for_selector("body[data-ready='1']", timeout=120_000)
        mark = await page.evaluate("performance.getEntriesByName('cdo-first-paint')[0].startTime")
        times.append(float(mark))
    return times


async def measure(args: argparse.Namespace) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="cdo-bench-ui-") as directory:
        tmp = Path(directory)
        nats = NatsServer(store_dir=tmp / "nats")
        nats.start()
        nats.set_up_jetstream()  # the stream the page's feed reads, as the NATS bootstrap makes it
        bus = EventBus(
            NatsSettings(url=nats.url),
            service="health-monitor",
            instance="bench",
            metrics=Metrics(),
            tracer=TracerProvider().get_tracer("bench"),
        )
        try:
            await bus.connect()
            await bus.ensure_jetstream()
            async with browser() as context:
                page = await context.new_page()
                for racks, scenario in ((2, "events"), (args.racks, "paint")):
                    emulator, _url, kubeconfig = await start_emulator(tmp / scenario)
                    try:
                        client = await KubeClient.connect(kubeconfig=kubeconfig)
                        started = time.monotonic()
                        await create_racks(client, racks)
                        await client.close()
                        rows.append(
                            (
                                f"{racks} racks created in the API",
                                f"{time.monotonic() - started:.1f} s",
                            )
                        )
                        async with cdo_ui(kubeconfig, nats.url, tmp / scenario) as url:
                            if scenario == "events":
                                await page.goto(url)
                                await page.wait_for_selector(
                                    "body[data-feed='up'][data-ready='1']", timeout=60_000
                                )
                                latencies = await event_to_paint(
                                    page, bus, events=args.events, racks=racks
                                )
                                rows.append(
                                    ("event to paint p50", f"{percentile(latencies, 0.5):.0f} ms")
                                )
                                rows.append(
                                    ("event to paint p99", f"{percentile(latencies, 0.99):.0f} ms")
                                )
                                rows.append(("event to paint max", f"{max(latencies):.0f} ms"))
                                args.event_p99 = percentile(latencies, 0.99)
                            else:
                                # The server has listed everything before the first load counts.
                                await page.goto(url)
                                await page.wait_for_selector(
                                    "body[data-ready='1']", timeout=300_000
                                )
                                times = await first_paint(page, url, loads=args.loads)
                                rows.append(
                                    (
                                        f"first paint, {racks} racks (median of {len(times)})",
                                        f"{statistics.median(times):.0f} ms",
                                    )
                                )
                                rows.append(
                                    (f"first paint, {racks} racks (max)", f"{max(times):.0f} ms")
                                )
                                gpus = await page.locator("#racks .gpu").count()
                                rows.append(("GPUs drawn", str(gpus)))
                                args.first_paint = statistics.median(times)
                    finally:
                        emulator.terminate()
                        await emulator.wait()
        finally:
            await bus.close()
            nats.stop()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--racks", type=int, default=256)
    parser.add_argument("--events", type=int, default=40)
    parser.add_argument("--loads", type=int, default=3)
    args = parser.parse_args()
    rows = asyncio.run(measure(args))
    print("\n".join(measure_table(rows)), flush=True)
    print(result_line(figures(args)), flush=True)


def figures(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    """The RESULT figures; the first paint's key names the racks it drew."""
    return [
        ("ui_event_to_paint_p99_ms", fixed(args.event_p99, 0)),
        (f"ui_first_paint_ms_{args.racks}racks", fixed(args.first_paint, 0)),
    ]


if __name__ == "__main__":
    main()
