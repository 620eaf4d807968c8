"""What a simulated cluster of hollow racks costs: ``python -m bench.hollow --racks 8,256``.

For each size, one after another: ``cdo sim up --racks N --full-racks M`` (the whole system:
NATS, the cluster, the control plane, the node host of the full racks), the bring-up time, then
each process's RSS and CPU share over ``--window`` seconds of a cluster at rest, then two
domains of 18 pods x 4 GPUs applied together, one pinned (``nodeSelector`` on its rack's
``cdo.dev/nvlink-domain``) to the last hollow rack and one to the first full rack, each timed
from the create to Ready with every pod Running; then ``cdo sim down``.

    python -m bench.hollow [--racks 8,32] [--full-racks 1] [--window 15] [--timeout 600]

Prints a table per size and one line ``RESULT key=value ...`` with the size in each key:
``bringup_s_<N>``, ``<process>_rss_mb_<N>`` and ``<process>_cpu_pct_<N>`` (process: sim,
api, nodehost, allocator, controller, nats), ``hollow_domain_ready_s_<N>``,
``full_domain_ready_s_<N>``. A domain that is not Ready within ``--timeout`` prints
``<key>_timed_out=1`` instead of a time. The cost of a hollow rack is the difference of two
sizes divided by the racks between them (docs/simulator.md#hollow-racks).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from bench._e2e_workloads import compute_domain, gpu_deployment
from bench._report import fixed, result_line
from shared.crds import COMPUTE_DOMAINS, COMPUTE_DOMAINS_V1BETA1, ComputeDomain
from shared.crds.names import NVLINK_DOMAIN_LABEL
from shared.kube.client import KubeClient
from shared.kube.models import Node, Pod
from shared.kube.resources import DEPLOYMENTS, NAMESPACES, NODES, PODS
from sim import control as simctl
from sim.control.state import read_controlplane, read_record, require_cluster

NAMESPACE = "hollow-bench"
PODS_PER_DOMAIN = 18
GPUS_PER_POD = 4
CLK_TCK = os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found.extend(int(child) for child in text)
    return found


def processes(state_dir: Path) -> dict[str, int]:
    """The system's processes by short name: their pids."""
    record = read_record(state_dir)
    assert record is not None, f"no system runs in {state_dir}"
    names = {"nats-server": "nats", "simulated cluster": "sim", "node host": "nodehost"}
    found = {names[p.name]: p.pid for p in record.processes if p.name in names}
    cluster = require_cluster(state_dir)
    api = [pid for pid in _children(cluster.pid) if b"sim.kubeapi" in _cmdline(pid)]
    if api:
        found["api"] = api[0]
    plane = read_controlplane(state_dir)
    if plane is not None:
        short = {"clique-allocator": "allocator", "domain-controller": "controller"}
        found.update({short[name]: svc.pid for name, svc in plane.services.items()})
    return found


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def usage(pids: dict[str, int], window_s: float) -> dict[str, tuple[float, float]]:
    """Each process's RSS (MB) at the end and CPU share (% of one core) over the window."""
    before = {name: cpu_ticks(pid) for name, pid in pids.items()}
    time.sleep(window_s)
    return {
        name: (rss_mb(pid), 100 * (cpu_ticks(pid) - before[name]) / CLK_TCK / window_s)
        for name, pid in pids.items()
    }


async def nvlink_domain(client: KubeClient, node: str) -> str:
    decoded = msgspec.json.decode(await client.get(NODES, node), type=Node)
    return decoded.metadata.labels[NVLINK_DOMAIN_LABEL]


async def domain_ready(
    client: KubeClient, name: str, *, namespace: str = NAMESPACE, pods: int = PODS_PER_DOMAIN
) -> bool:
    """The domain is Ready and its ``pods`` pods (label ``app=<name>``) are all Running."""
    raw = await client.get_or_none(COMPUTE_DOMAINS, name, namespace=namespace)
    if raw is None:
        return False
    domain = msgspec.json.decode(raw, type=ComputeDomain)
    if domain.status.status != "Ready":
        return False
    found = msgspec.json.decode(
        await client.list(PODS, namespace=namespace, label_selector=f"app={name}"),
        type=_Pods,
    ).items
    return len(found) == pods and all(p.status.phase == "Running" for p in found)


class _Pods(msgspec.Struct):
    items: list[Pod]


async def time_domains(
    kubeconfig: str, racks: dict[str, str], *, timeout_s: float
) -> dict[str, float | None]:
    """Create a domain per ``name -> rack`` at once; seconds until each is Ready (None: not
    within ``timeout_s``)."""
    client = await KubeClient.connect(kubeconfig=kubeconfig)
    try:
        await client.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
        started = time.monotonic()
        for name, rack in racks.items():
            await client.create(
                COMPUTE_DOMAINS_V1BETA1, compute_domain(name, NAMESPACE), namespace=NAMESPACE
            )
            deployment = gpu_deployment(
                name, NAMESPACE, domain=name, replicas=PODS_PER_DOMAIN, gpus_per_pod=GPUS_PER_POD
            )
            selector = {NVLINK_DOMAIN_LABEL: await nvlink_domain(client, f"{rack}-tray00")}
            deployment["spec"]["template"]["spec"]["nodeSelector"] = selector
            await client.create(DEPLOYMENTS, deployment, namespace=NAMESPACE)
        times: dict[str, float | None] = dict.fromkeys(racks)
        while any(t is None for t in times.values()) and time.monotonic() - started < timeout_s:
            for name in racks:
                if times[name] is None and await domain_ready(client, name):
                    times[name] = time.monotonic() - started
            await asyncio.sleep(0.5)
        return times
    finally:
        await client.close()


def up_options(
    state_dir: Path, *, racks: int, full_racks: int, timeout_s: float
) -> simctl.UpOptions:
    """``cdo sim up --racks racks --full-racks full_racks``, waiting up to ``timeout_s``."""
    return simctl.UpOptions(
        state_dir=state_dir,
        topology=None,
        nats_url=None,
        nodes="*",
        imex_server_port=None,
        imex_cmd_port=None,
        wait=True,
        timeout_s=timeout_s,
        racks=racks,
        full_racks=full_racks,
    )


def measure(
    racks: int, *, full_racks: int, window_s: float, timeout_s: float, say: Callable[[str], None]
) -> list[tuple[str, str | None]]:
    state_dir = Path(tempfile.mkdtemp(prefix="cdo-hollow-", dir="/tmp"))
    options = up_options(state_dir, racks=racks, full_racks=full_racks, timeout_s=timeout_s)
    started = time.monotonic()
    try:
        simctl.up(options, say=lambda _line: None)
        bringup = time.monotonic() - started
        used = usage(processes(state_dir), window_s)
        record = read_record(state_dir)
        assert record is not None
        domains = {"on-hollow": f"rack-{racks - 1}", "on-full": "rack-0"}
        if full_racks == 0:
            del domains["on-full"]
        if full_racks >= racks:
            del domains["on-hollow"]
        ready = asyncio.run(time_domains(record.kubeconfig, domains, timeout_s=timeout_s))
    finally:
        simctl.down(state_dir, say=lambda _line: None)
        shutil.rmtree(state_dir, ignore_errors=True)
    say(f"{racks} racks ({racks * 18} nodes, {racks * 72} GPUs), {full_racks} full:")
    say(f"  bring-up (cdo sim up)       {bringup:7.1f} s")
    say(f"  {'process':<12} {'RSS MB':>8} {'CPU %':>7}   (at rest, over {window_s:.0f} s)")
    for name, (rss, cpu) in sorted(used.items()):
        say(f"  {name:<12} {rss:8.0f} {cpu:7.1f}")
    for name, seconds in ready.items():
        shown = "not within the timeout" if seconds is None else f"{seconds:.1f} s"
        say(f"  18 x 4-GPU domain {name:<10} Ready in {shown}")
    figures: list[tuple[str, str | None]] = [(f"bringup_s_{racks}", fixed(bringup, 1))]
    for name, (rss, cpu) in sorted(used.items()):
        figures += [(f"{name}_rss_mb_{racks}", fixed(rss, 0))]
        figures += [(f"{name}_cpu_pct_{racks}", fixed(cpu, 1))]
    for name, seconds in ready.items():
        key = f"{name.removeprefix('on-')}_domain_ready_s_{racks}"
        figures += [(key, fixed(seconds, 1)) if seconds is not None else (f"{key}_timed_out", "1")]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.hollow", description=__doc__)
    parser.add_argument("--racks", default="8,32", help="sizes, comma separated (8,32)")
    parser.add_argument("--full-racks", type=int, default=1)
    parser.add_argument("--window", type=float, default=15.0, help="seconds at rest measured")
    parser.add_argument("--timeout", type=float, default=600.0, help="per step, seconds")
    args = parser.parse_args()
    figures: list[tuple[str, str | None]] = []
    for racks in (int(size) for size in args.racks.split(",")):
        figures += measure(
            racks,
            full_racks=args.full_racks,
            window_s=args.window,
            timeout_s=args.timeout,
            say=lambda line: print(line, flush=True),
        )
    print(result_line(figures))


if __name__ == "__main__":
    main()
