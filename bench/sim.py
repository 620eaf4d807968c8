"""How fast the simulated cluster comes up and runs pods.

Brings up the 8-rack topology (144 GB200 trays, 576 GPUs) in one process — API emulator,
kubelets, scheduler, controllers — and then runs a Job of --pods single-GPU pods (parallelism =
completions, each pod "runs" --run-seconds), so more pods than GPUs pass through scheduling to
Running as earlier ones finish. Prints bring-up time, time until every pod has been Running, the
creation->Running latency per pod, and the process RSS.

    python -m bench.sim [--topology sim/topologies/eight-racks.yaml] [--pods 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import resource
import shutil
import tempfile
import time
from pathlib import Path

from bench._report import fixed, percentile, result_line
from shared.kube.informer import Informer
from shared.kube.models import Pod
from shared.kube.resources import JOBS, PODS
from sim.cluster import ClusterOptions, SimulatedCluster
from sim.topology import TOPOLOGIES_DIR


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def job(pods: int, run_seconds: float) -> dict[str, object]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "bench", "namespace": "default"},
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "backoffLimit": 0,
            "template": {
                "metadata": {
                    "labels": {"app": "bench"},
                    "annotations": {"sim.cdo.dev/run-seconds": str(run_seconds)},
                },
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "work",
                            "image": "bench:1",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ],
                },
            },
        },
    }


async def run(args: argparse.Namespace) -> None:
    state = Path(tempfile.mkdtemp(prefix="cdo-bench-"))
    started = time.perf_counter()
    try:
        async with SimulatedCluster.running(
            ClusterOptions(state_dir=state, topology=args.topology, label_cliques=True)
        ) as cluster:
            up_s = time.perf_counter() - started
            nodes = len(cluster.topology.nodes)
            gpus = sum(len(node.gpus) for node in cluster.topology.nodes)
            created: dict[str, float] = {}
            running: dict[str, float] = {}

            def on_pod(_old: Pod | None, new: Pod | None) -> None:
                if new is None:
                    return
                name = new.metadata.name
                created.setdefault(name, time.perf_counter())
                if new.status.phase in ("Running", "Succeeded") and name not in running:
                    running[name] = time.perf_counter()

            pods = Informer(cluster.client, PODS, Pod, label_selector="app=bench")
            pods.add_handler(on_pod)
            watcher = asyncio.create_task(pods.run())
            await pods.wait_synced()
            begin = time.perf_counter()
            await cluster.client.create(JOBS, job(args.pods, args.run_seconds), namespace="default")
            while len(running) < args.pods:
                if time.perf_counter() - begin > args.timeout:
                    raise TimeoutError(f"only {len(running)} of {args.pods} pods ran")
                await asyncio.sleep(0.05)
            all_ran_s = time.perf_counter() - begin
            latencies = [running[name] - created[name] for name in running]
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
            memory = rss_mb()
    finally:
        shutil.rmtree(state, ignore_errors=True)

    print(f"simulated cluster: {nodes} nodes, {gpus} GPUs ({args.topology.name})")
    print(f"{'measure':44}{'value':>12}")
    print(f"{'bring-up (API, kubelets Ready, controllers)':44}{up_s:11.2f}s")
    print(f"{f'{args.pods} single-GPU pods, all Running by':44}{all_ran_s:11.2f}s")
    print(f"{'pods per second through to Running':44}{args.pods / all_ran_s:12.1f}")
    print(f"{'pod created -> Running p50':44}{percentile(latencies, 0.5) * 1e3:10.0f}ms")
    print(f"{'pod created -> Running p99':44}{percentile(latencies, 0.99) * 1e3:10.0f}ms")
    print(f"{'process RSS (max)':44}{memory:10.0f}MB")
    print(
        result_line(
            [
                ("nodes", nodes),
                ("gpus", gpus),
                ("bringup_s", fixed(up_s, 2)),
                ("pods", args.pods),
                ("all_running_s", fixed(all_ran_s, 2)),
                ("pods_per_s", fixed(args.pods / all_ran_s, 1)),
                ("running_p50_ms", fixed(percentile(latencies, 0.5) * 1e3, 0)),
                ("running_p99_ms", fixed(percentile(latencies, 0.99) * 1e3, 0)),
                ("rss_mb", fixed(memory, 0)),
            ]
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--topology", type=Path, default=TOPOLOGIES_DIR / "eight-racks.yaml")
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--run-seconds", type=float, default=1.0)
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
