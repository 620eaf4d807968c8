"""Benchmark of the domain controller: a burst of ComputeDomains, and its memory at scale.

Everything runs as separate processes, as in a cluster: the API emulator
(``python -m sim.kubeapi``), a real nats-server with JetStream, and the domain controller
(``python -m services.domain_controller``). The benchmark

1. creates ``--domains`` ComputeDomains at once and measures, from a watch, how long each
   waits for its first status (finalizer, claim template, status, membership event done),
   and the controller's reconciles per second over the burst;
2. creates ``--nodes`` nodes and ``--pods`` pods (each pod's claim naming one of the domains'
   templates, so the pod index is exercised), waits until the controller's caches hold them
   all and it is idle again, and reports its resident memory (VmRSS).

The default size, 1,000 domains, 2,000 nodes and 20,000 pods, takes about a minute on two
cores. Prints a table and ends with one ``RESULT`` line.

    python -m bench.controller [--domains 1000] [--nodes 2000] [--pods 20000] [--workers 16]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import yaml

from bench._kubeapi_client import post_all as post_every
from bench._report import fixed, measure_table, result_line
from shared.crds import COMPUTE_DOMAINS, install_crds
from shared.kube.client import KubeClient
from sim.natsserver import NatsServer, free_port

NAMESPACE = "default"
DOMAINS_PATH = COMPUTE_DOMAINS.path(namespace=NAMESPACE)
CONCURRENCY = 32


class _Meta(msgspec.Struct):
    name: str = ""
    resourceVersion: str = ""  # noqa: N815 - API field name


class _Status(msgspec.Struct):
    observedGeneration: int = 0  # noqa: N815 - API field name


class _Domain(msgspec.Struct):
    metadata: _Meta
    status: _Status = msgspec.field(default_factory=_Status)


class _Event(msgspec.Struct):
    type: str
    object: _Domain


class _List(msgspec.Struct):
    metadata: _Meta


def domain(i: int) -> dict[str, Any]:
    return {
        "apiVersion": COMPUTE_DOMAINS.api_version,
        "kind": COMPUTE_DOMAINS.kind,
        "metadata": {"name": f"domain-{i:04d}", "namespace": NAMESPACE},
        "spec": {"channel": {"resourceClaimTemplate": {"name": f"domain-{i:04d}-rct"}}},
    }


def node(i: int) -> dict[str, Any]:
    rack = i // 18
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"gb200-r{rack:03d}-n{i % 18:02d}",
            "labels": {
                "kubernetes.io/hostname": f"gb200-r{rack:03d}-n{i % 18:02d}",
                "nvidia.com/gpu.clique": f"0f3e9a5c-1b2d-4c6e-8f00-{rack:012d}.1",
                "nvidia.com/gpu.product": "NVIDIA-GB200",
                "topology.kubernetes.io/rack": f"rack-{rack}",
            },
        },
        "status": {
            "capacity": {"cpu": "144", "memory": "1Ti", "nvidia.com/gpu": "4"},
            "allocatable": {"cpu": "140", "memory": "990Gi", "nvidia.com/gpu": "4"},
            "addresses": [
                {"type": "InternalIP", "address": f"10.{rack // 250}.{rack % 250}.{i % 18}"}
            ],
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady"},
                {"type": "cdo.dev/ImexReady", "status": "True", "reason": "ImexReady"},
            ],
        },
    }


def pod(i: int, *, domains: int, nodes: int) -> dict[str, Any]:
    owner = i % domains
    rack = (i % nodes) // 18
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"worker-{i:05d}",
            "namespace": NAMESPACE,
            "labels": {"app": f"job-{owner}", "index": str(i % 4)},
        },
        "spec": {
            "nodeName": f"gb200-r{rack:03d}-n{i % nodes % 18:02d}",
            "containers": [
                {
                    "name": "trainer",
                    "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                    "command": ["torchrun", "--nnodes=16", "train.py"],
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ],
            "resourceClaims": [
                {"name": "imex-channel", "resourceClaimTemplateName": f"domain-{owner:04d}-rct"}
            ],
        },
    }


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_s(pid: int) -> float:
    """User plus system CPU seconds the process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scrape(port: int) -> dict[str, float]:
    """The controller's /metrics, summed per metric name and label set."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            samples[key] = float(value)
    return samples


def metric(samples: dict[str, float], name: str, /, **labels: str) -> float:
    total = 0.0
    for key, value in samples.items():
        if key.split("{")[0] != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', key))
        if all(found.get(k) == v for k, v in labels.items()):
            total += value
    return total


async def post_all(
    session: aiohttp.ClientSession, url: str, bodies: list[tuple[str, dict[str, Any]]]
) -> tuple[float, dict[str, float]]:
    """POST everything with a few connections; returns elapsed time and when each finished."""
    done: dict[str, float] = {}
    took = await post_every(session, url, list(bodies), CONCURRENCY, finished=done)
    return took, done


async def watch_status(
    session: aiohttp.ClientSession, url: str, rv: str, expected: int, seen: dict[str, float]
) -> None:
    """Record when each domain first shows a status the controller wrote."""
    decoder = msgspec.json.Decoder(_Event)
    pending = b""
    params = {"watch": "true", "resourceVersion": rv}
    async with session.get(
        url + DOMAINS_PATH, params=params, timeout=aiohttp.ClientTimeout(total=None)
    ) as response:
        async for chunk in response.content.iter_any():
            now = time.perf_counter()
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            for line in lines:
                event = decoder.decode(line)
                name = event.object.metadata.name
                if event.object.status.observedGeneration and name not in seen:
                    seen[name] = now
            if len(seen) >= expected:
                return


async def wait_until(probe: Any, *, limit_s: float, what: str) -> None:
    deadline = time.monotonic() + limit_s
    while not probe():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what}")
        await asyncio.sleep(0.2)


def idle(samples: dict[str, float], previous: dict[str, float]) -> bool:
    queue = {"name": "computedomains"}
    return (
        metric(samples, "workqueue_depth", **queue) == 0
        and metric(samples, "workqueue_unfinished_work_seconds", **queue) == 0
        and metric(samples, "workqueue_adds_total", **queue)
        == metric(previous, "workqueue_adds_total", **queue)
    )


async def start_emulator(tmp: Path) -> tuple[asyncio.subprocess.Process, str, Path]:
    kubeconfig = tmp / "kubeconfig"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sim.kubeapi",
        "--kubeconfig",
        str(kubeconfig),
        "--watch-window",
        "100000",
        "--bookmark-interval",
        "5",
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    await asyncio.wait_for(process.stdout.readline(), 60)
    url = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    return process, url, kubeconfig


async def start_controller(
    tmp: Path, *, kubeconfig: Path, nats_url: str, port: int, workers: int
) -> asyncio.subprocess.Process:
    env = {
        **os.environ,
        "CDO_NATS_URL": nats_url,
        "CDO_HTTP_HOST": "127.0.0.1",
        "CDO_HTTP_PORT": str(port),
        "CDO_INSTANCE": "bench",
        "CDO_LOG_LEVEL": "warning",
        "CDO_DOMAIN_CONTROLLER_KUBECONFIG": str(kubeconfig),
        "CDO_DOMAIN_CONTROLLER_LEASE_NAMESPACE": NAMESPACE,
        "CDO_DOMAIN_CONTROLLER_WORKERS": str(workers),
    }
    with (tmp / "controller.stderr").open("wb") as stderr:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "services.domain_controller", env=env, stderr=stderr
        )


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


async def run(args: argparse.Namespace) -> None:
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="controller-bench-") as directory:
        tmp = Path(directory)
        nats = NatsServer(store_dir=tmp / "nats")
        nats.start()
        nats.set_up_jetstream()
        emulator, url, kubeconfig = await start_emulator(tmp)
        port = free_port()
        controller: asyncio.subprocess.Process | None = None
        try:
            client = await KubeClient.connect(kubeconfig=kubeconfig)
            await install_crds(client)
            await client.close()
            controller = await start_controller(
                tmp, kubeconfig=kubeconfig, nats_url=nats.url, port=port, workers=args.workers
            )
            await wait_until(lambda: ready(port), limit_s=60, what="controller ready")
            rss_idle = rss_mb(controller.pid)

            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
                async with session.get(url + DOMAINS_PATH) as response:
                    rv = msgspec.json.decode(await response.read(), type=_List).metadata
                seen: dict[str, float] = {}
                watcher = asyncio.create_task(
                    watch_status(session, url, rv.resourceVersion, args.domains, seen)
                )
                before = scrape(port)
                cpu_before = (cpu_s(controller.pid), cpu_s(emulator.pid))
                started = time.perf_counter()
                create_s, created = await post_all(
                    session, url, [(DOMAINS_PATH, domain(i)) for i in range(args.domains)]
                )
                await asyncio.wait_for(watcher, args.limit)
                all_status_s = max(seen.values()) - started
                after = scrape(port)
                controller_cpu = cpu_s(controller.pid) - cpu_before[0]
                emulator_cpu = cpu_s(emulator.pid) - cpu_before[1]
                waits = sorted(seen[name] - created[name] for name in created)
                reconciles = metric(
                    after, "controller_runtime_reconcile_total", controller="computedomains"
                )
                reconciles -= metric(
                    before, "controller_runtime_reconcile_total", controller="computedomains"
                )
                errors = metric(
                    after,
                    "controller_runtime_reconcile_total",
                    controller="computedomains",
                    result="error",
                )
                published = metric(after, "cdo_bus_messages_published_total")
                reconcile_rate = reconciles / all_status_s
                p50 = statistics.median(waits)
                p99 = waits[max(0, int(len(waits) * 0.99) - 1)]
                rows += [
                    (
                        f"create {args.domains} ComputeDomains",
                        f"{create_s:.1f} s ({args.domains / create_s:.0f}/s)",
                    ),
                    ("every domain has its status", f"{all_status_s:.1f} s after the first create"),
                    (
                        "time to status p50 / p99 / max",
                        f"{1000 * p50:.0f} / {1000 * p99:.0f} / {1000 * waits[-1]:.0f} ms",
                    ),
                    (
                        "reconciles during the burst",
                        f"{reconciles:.0f} ({reconcile_rate:.0f}/s, {errors:.0f} retried)",
                    ),
                    ("membership events published", f"{published:.0f}"),
                    (
                        "CPU during the burst: controller / emulator",
                        f"{controller_cpu:.1f} s ({1000 * controller_cpu / reconciles:.1f} ms per "
                        f"reconcile) / {emulator_cpu:.1f} s",
                    ),
                ]

                nodes_s, _ = await post_all(
                    session, url, [("/api/v1/nodes", node(i)) for i in range(args.nodes)]
                )
                pods_path = f"/api/v1/namespaces/{NAMESPACE}/pods"
                bodies = [
                    (pods_path, pod(i, domains=args.domains, nodes=args.nodes))
                    for i in range(args.pods)
                ]
                pods_s, _ = await post_all(session, url, bodies)

                def cached(samples: dict[str, float], resource: str) -> float:
                    return metric(
                        samples, "cdo_informer_events_total", resource=resource, type="ADDED"
                    )

                previous: dict[str, float] = {}

                def caught_up() -> bool:
                    nonlocal previous
                    samples = scrape(port)
                    done = (
                        cached(samples, "nodes") >= args.nodes
                        and cached(samples, "pods") >= args.pods
                        and idle(samples, previous)
                    )
                    previous = samples
                    return done

                await wait_until(caught_up, limit_s=args.limit, what="caches filled")
                rss_loaded = rss_mb(controller.pid)
                rows += [
                    (f"create {args.nodes} nodes", f"{nodes_s:.1f} s"),
                    (f"create {args.pods} pods", f"{pods_s:.1f} s"),
                    ("controller RSS idle", f"{rss_idle:.0f} MB"),
                    (
                        f"controller RSS, {args.domains} domains / {args.nodes} nodes / "
                        f"{args.pods} pods cached",
                        f"{rss_loaded:.0f} MB",
                    ),
                ]
        finally:
            if controller is not None and controller.returncode is None:
                controller.terminate()
                await controller.wait()
            emulator.terminate()
            await emulator.wait()
            nats.stop()

    print("\n".join(measure_table(rows, rule=34)))
    print(
        result_line(
            [
                ("domains", args.domains),
                ("workers", args.workers),
                ("reconciles_per_s", fixed(reconcile_rate, 0)),
                ("all_status_s", fixed(all_status_s, 2)),
                ("time_to_status_p50_ms", fixed(1000 * p50, 0)),
                ("time_to_status_p99_ms", fixed(1000 * p99, 0)),
                ("nodes", args.nodes),
                ("pods", args.pods),
                ("rss_idle_mb", fixed(rss_idle, 0)),
                ("rss_loaded_mb", fixed(rss_loaded, 0)),
            ]
        )
    )


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--domains", type=int, default=1000, help="created at once (1000)")
    parser.add_argument("--nodes", type=int, default=2000, help="nodes in the cache (2000)")
    parser.add_argument("--pods", type=int, default=20000, help="pods in the cache (20000)")
    parser.add_argument("--workers", type=int, default=16, help="reconcile workers (16)")
    parser.add_argument("--limit", type=float, default=600, help="give up after seconds")
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(run(parse()))
