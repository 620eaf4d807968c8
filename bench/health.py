"""How fast the health monitor reacts: an injected XID to the fault event and to the taint.

The API emulator (``python -m sim.kubeapi``) and a real nats-server with JetStream run as
separate processes. The health monitor runs in this process on one simulated node's NVML
(the simulated library lives where faults are injected), next to the observer: a NATS
subscription to the node's fault events and a watch on its Node, and the circuit breaker's
arbiter (which the clique allocator's leader runs in a cluster) answers its claims for NoExecute,
with a window of 0 s, so that every round claims and is answered.

Each of ``--injections`` rounds raises XID 79 on one GPU (the GPUs in turn) and measures,
from the injection, when the NodeFault arrives at the subscriber and when the watch shows the
``cdo.dev/gpu-fault`` NoExecute taint; then it waits for the node to recover (short latch and
hold-down) so the next XID starts a new fault episode. The replacement pod's delay needs the
whole simulated cluster (scheduler, kubelets, workload controllers, allocator) and is not
measured here.

    python -m bench.health [--injections 100] [--warmup 5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml
from opentelemetry.sdk.trace import TracerProvider

from services.clique_allocator.breaker import BreakerArbiter, BreakerSettings
from services.clique_allocator.metrics import AllocatorMetrics
from services.health_monitor.monitor import HealthMonitor
from services.health_monitor.settings import MonitorSettings
from shared.bus import EventBus, NatsSettings
from shared.crds.names import GPU_FAULT_TAINT, GPU_HEALTHY_CONDITION
from shared.events import Event, NodeFault, NodeRecovered
from shared.kube.client import KubeClient
from shared.kube.informer import Informer, InformerSettings
from shared.kube.models import Node
from shared.kube.resources import NODES
from shared.metrics import Metrics
from shared.nvml import PynvmlNvml
from sim.natsserver import NatsServer
from sim.nvml import SimulatedNvml, bound_context
from sim.topology import load_topology

SETTINGS = MonitorSettings(
    read_interval_s=0.5,
    event_wait_s=0.2,
    hold_down_s=0.02,
    xid_latch_s=0.01,
    kube_events=False,
    informer=InformerSettings(backoff_initial_s=0.05),
)


class Observer:
    """Arrival times of fault events and taint changes, for the round in flight."""

    def __init__(self) -> None:
        self.event_at: asyncio.Future[float] | None = None
        self.taint_at: asyncio.Future[float] | None = None
        self.recovered = asyncio.Event()
        self.untainted = asyncio.Event()
        self.healthy = asyncio.Event()

    def arm(self) -> None:
        loop = asyncio.get_running_loop()
        self.event_at = loop.create_future()
        self.taint_at = loop.create_future()
        self.recovered.clear()
        self.untainted.clear()

    async def on_event(self, event: Event) -> None:
        now = time.perf_counter()
        if isinstance(event, NodeFault) and self.event_at and not self.event_at.done():
            self.event_at.set_result(now)
        elif isinstance(event, NodeRecovered):
            self.recovered.set()

    def on_node(self, _old: Node | None, new: Node | None) -> None:
        if new is None:
            return
        now = time.perf_counter()
        taint = next((t for t in new.spec.taints if t.key == GPU_FAULT_TAINT), None)
        if taint is None:
            if self.taint_at is not None and self.taint_at.done():
                self.untainted.set()  # removed after this round's taint, not before it
        elif taint.effect == "NoExecute" and self.taint_at and not self.taint_at.done():
            self.taint_at.set_result(now)
        condition = new.condition(GPU_HEALTHY_CONDITION)
        if condition is not None and condition.status == "True":
            self.healthy.set()


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))
    return ordered[index]


async def start_emulator(tmp: Path) -> tuple[asyncio.subprocess.Process, Path]:
    kubeconfig = tmp / "kubeconfig"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sim.kubeapi",
        "--kubeconfig",
        str(kubeconfig),
        "--bookmark-interval",
        "5",
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    await asyncio.wait_for(process.stdout.readline(), 60)
    yaml.safe_load(kubeconfig.read_text())  # written completely before the line above
    return process, kubeconfig


async def make_bus(url: str, service: str) -> EventBus:
    bus = EventBus(
        NatsSettings(url=url),
        service=service,
        instance="bench",
        metrics=Metrics(),
        tracer=TracerProvider().get_tracer("bench"),
    )
    await bus.connect()
    await bus.ensure_jetstream()
    return bus


async def measure(args: argparse.Namespace, tmp: Path) -> tuple[list[float], list[float]]:
    nats = NatsServer(store_dir=tmp / "nats")
    nats.start()
    nats.set_up_jetstream()
    emulator, kubeconfig = await start_emulator(tmp)
    buses: list[EventBus] = []
    tasks: list[asyncio.Task[None]] = []
    client = await KubeClient.connect(kubeconfig=kubeconfig)
    try:
        topology = load_topology().nodes[0]
        await client.create(
            NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": topology.name}}
        )
        publisher = await make_bus(nats.url, "health-monitor")
        subscriber = await make_bus(nats.url, "observer")
        buses += [publisher, subscriber]
        observer = Observer()
        await subscriber.subscribe("cdo.v1.node.>", observer.on_event)
        await subscriber.nc.flush()
        watch = Informer(client, NODES, Node, field_selector=f"metadata.name={topology.name}")
        watch.add_handler(observer.on_node)
        tasks.append(asyncio.create_task(watch.run()))
        await watch.wait_synced()

        nodes = Informer(client, NODES, Node)
        arbiter = BreakerArbiter(
            nodes=nodes,
            reader=client,
            writer=client,
            settings=BreakerSettings(window_s=0),
            rulings=AllocatorMetrics(Metrics()).breaker_rulings,
        )
        tasks += [asyncio.create_task(nodes.run()), asyncio.create_task(arbiter.run())]

        sim = SimulatedNvml(topology)
        monitor = HealthMonitor(
            node_name=topology.name,
            nvml=PynvmlNvml(),
            client=client,
            publisher=publisher,
            metrics=Metrics(),
            settings=SETTINGS,
        )
        tasks.append(asyncio.create_task(monitor.run(), context=bound_context(sim)))
        await asyncio.wait_for(observer.healthy.wait(), 30)

        to_event: list[float] = []
        to_taint: list[float] = []
        for round_ in range(args.warmup + args.injections):
            observer.arm()
            assert observer.event_at is not None and observer.taint_at is not None
            injected = time.perf_counter()
            sim.raise_xid(round_ % 4, 79)
            event_at = await asyncio.wait_for(observer.event_at, 10)
            taint_at = await asyncio.wait_for(observer.taint_at, 10)
            await asyncio.wait_for(observer.recovered.wait(), 10)
            await asyncio.wait_for(observer.untainted.wait(), 10)
            if round_ >= args.warmup:
                to_event.append((event_at - injected) * 1000)
                to_taint.append((taint_at - injected) * 1000)
        return to_event, to_taint
    finally:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for bus in buses:
            await bus.stop_intake()
            await bus.close()
        await client.close()
        emulator.terminate()
        await emulator.wait()
        nats.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--injections", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    logging.getLogger("cdo").setLevel(logging.ERROR)  # a fault log line per injection otherwise
    with tempfile.TemporaryDirectory(prefix="health-bench-") as directory:
        to_event, to_taint = asyncio.run(measure(args, Path(directory)))

    print(f"health monitor reaction to XID 79, {len(to_event)} injections (ms)")
    print(f"{'from the injection to':<34}{'p50':>9}{'p99':>9}{'max':>9}{'mean':>9}")
    rows = (
        ("NodeFault at a NATS subscriber", to_event),
        ("NoExecute taint seen by a watch", to_taint),
    )
    for label, values in rows:
        print(
            f"{label:<34}{percentile(values, 0.5):>9.2f}{percentile(values, 0.99):>9.2f}"
            f"{max(values):>9.2f}{statistics.fmean(values):>9.2f}"
        )
    print("replacement pod Running: not measured (needs the whole simulated cluster)")
    print(
        "RESULT "
        f"injections={len(to_event)} "
        f"fault_event_p50_ms={percentile(to_event, 0.5):.2f} "
        f"fault_event_p99_ms={percentile(to_event, 0.99):.2f} "
        f"taint_p50_ms={percentile(to_taint, 0.5):.2f} "
        f"taint_p99_ms={percentile(to_taint, 0.99):.2f}"
    )


if __name__ == "__main__":
    main()
