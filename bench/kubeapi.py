"""Benchmark of the Kubernetes API emulator: LIST latency, watch fan-out, memory.

Runs the emulator standalone (``python -m sim.kubeapi``) in its own process, stores
2,000 nodes and 20,000 pods through the API, then measures LIST latencies (whole,
paginated, by node, by label) and the fan-out of 1,000 writes/s to 10 watchers
(delivery rate and lag). Then it does the same against a second emulator that enforces
authentication and RBAC (``enforce_auth``, plain HTTP so that only authorization differs),
as a ServiceAccount whose ClusterRole allows what the benchmark does. Prints a table and
ends with one ``RESULT`` line.

Targets: LIST of 20,000 pods under 1 s; 10 watchers keep up with 1,000 writes/s; RBAC
costs under 20 % on the LIST (``authz_overhead_ratio`` < 1.2).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import msgspec
import yaml

from bench._report import fixed, measure_table, percentile, result_line

PODS = "/api/v1/namespaces/{ns}/pods"
NAMESPACES = 10


class _Meta(msgspec.Struct):
    resourceVersion: str = ""  # noqa: N815 - API field name
    name: str = ""


class _Object(msgspec.Struct):
    metadata: _Meta


class _Event(msgspec.Struct):
    type: str
    object: _Object


class _ListMeta(msgspec.Struct):
    resourceVersion: str = ""  # noqa: N815 - API field name
    continue_: str = msgspec.field(default="", name="continue")


class _PodList(msgspec.Struct):
    items: list[_Object]
    metadata: _ListMeta


def node(i: int) -> dict[str, object]:
    rack = i // 18
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"node-{i:04d}",
            "labels": {
                "kubernetes.io/hostname": f"node-{i:04d}",
                "nvidia.com/gpu.clique": f"0f3e9a5c-1b2d-4c6e-8f00-{rack:012d}.1",
                "topology.kubernetes.io/rack": f"rack-{rack}",
            },
        },
        "status": {
            "capacity": {"cpu": "144", "memory": "1Ti", "nvidia.com/gpu": "4"},
            "allocatable": {"cpu": "140", "memory": "990Gi", "nvidia.com/gpu": "4"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "nodeInfo": {"kubeletVersion": "v1.37.0"},
        },
    }


def pod(i: int, nodes: int) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"worker-{i:05d}",
            "labels": {
                "app": f"job-{i % 200}",
                "cdo.nvidia.com/domain": f"domain-{i % 50}",
                "index": str(i % 4),
            },
            "annotations": {"cdo.nvidia.com/placement": f"clique-{i % 111}"},
        },
        "spec": {
            "nodeName": f"node-{i % nodes:04d}",
            "containers": [
                {
                    "name": "trainer",
                    "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                    "command": ["torchrun", "--nnodes=16", "train.py"],
                    "env": [
                        {"name": "NCCL_DEBUG", "value": "WARN"},
                        {"name": "RANK", "value": str(i % 64)},
                    ],
                    "resources": {
                        "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "1"},
                        "limits": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "1"},
                    },
                }
            ],
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ],
        },
    }


@dataclass
class Watcher:
    received: int = 0
    lags: list[float] = field(default_factory=list)
    done: asyncio.Event = field(default_factory=asyncio.Event)


ADMIN = {"Authorization": "Bearer cdo-sim-admin-token"}
RBAC = "/apis/rbac.authorization.k8s.io/v1"
BENCH_RULES = [
    {"apiGroups": [""], "resources": ["pods", "nodes"], "verbs": ["get", "list", "watch", "patch"]}
]


async def start_server(tmp: Path, *, authz: bool) -> tuple[asyncio.subprocess.Process, str]:
    kubeconfig = tmp / ("kubeconfig-authz" if authz else "kubeconfig")
    config = {"watch_window": 50000, "enforce_auth": authz, "tls": False}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sim.kubeapi", "--port", "0", "--kubeconfig", str(kubeconfig),
        "--config-json", msgspec.json.encode(config).decode(),
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    await asyncio.wait_for(proc.stdout.readline(), 60)
    url = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    return proc, url


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def post_all(
    session: aiohttp.ClientSession,
    url: str,
    bodies: list[tuple[str, dict[str, object]]],
    concurrency: int,
) -> float:
    queue: asyncio.Queue[tuple[str, dict[str, object]]] = asyncio.Queue()
    for item in bodies:
        queue.put_nowait(item)

    async def worker() -> None:
        while not queue.empty():
            path, body = queue.get_nowait()
            async with session.post(
                url + path,
                data=msgspec.json.encode(body),
                headers={"Content-Type": "application/json"},
            ) as resp:
                if resp.status != 201:
                    raise RuntimeError(f"create failed {resp.status}: {await resp.text()}")
                await resp.read()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started


async def timed_get(
    session: aiohttp.ClientSession, url: str, params: dict[str, str] | None = None
) -> tuple[float, bytes]:
    started = time.perf_counter()
    async with session.get(url, params=params) as resp:
        body = await resp.read()
        assert resp.status == 200, body[:200]
    return time.perf_counter() - started, body


async def paged_walk(session: aiohttp.ClientSession, url: str, limit: int) -> tuple[float, int]:
    started = time.perf_counter()
    token, items = "", 0
    while True:
        params = {"limit": str(limit)}
        if token:
            params["continue"] = token
        async with session.get(url, params=params) as resp:
            page = msgspec.json.decode(await resp.read(), type=_PodList)
        items += len(page.items)
        token = page.metadata.continue_
        if not token:
            return time.perf_counter() - started, items


async def watch(
    session: aiohttp.ClientSession,
    url: str,
    rv: str,
    expected: int,
    sent: dict[str, float],
    state: Watcher,
) -> None:
    decoder = msgspec.json.Decoder(_Event)
    params = {"watch": "true", "resourceVersion": rv}
    pending = b""
    async with session.get(
        url, params=params, timeout=aiohttp.ClientTimeout(total=None, sock_read=60)
    ) as resp:
        # Read whole chunks and split lines here: per-line reads would make the load
        # generator, not the server, the bottleneck.
        async for chunk in resp.content.iter_any():
            now = time.perf_counter()
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            for line in lines:
                event = decoder.decode(line)
                state.received += 1
                at = sent.get(event.object.metadata.resourceVersion)
                if at is not None:
                    state.lags.append(now - at)
            if state.received >= expected:
                state.done.set()
                return


async def fan_out(
    session: aiohttp.ClientSession,
    url: str,
    pods: int,
    watchers: int,
    rate: float,
    duration: float,
    credentials: str = "",
) -> dict[str, float]:
    async with session.get(url + "/api/v1/pods", params={"limit": "1"}) as resp:
        rv = (await resp.json())["metadata"]["resourceVersion"]
    writes = int(rate * duration)
    sent: dict[str, float] = {}
    states = [Watcher() for _ in range(watchers)]
    tasks = [
        asyncio.create_task(watch(session, url + "/api/v1/pods", rv, writes, sent, s))
        for s in states
    ]
    await asyncio.sleep(0.5)  # let every watch connect
    concurrency = 16
    interval = 1.0 / rate
    started = time.perf_counter()
    counter = iter(range(writes))
    host, port = url.removeprefix("http://").split(":")
    decoder = msgspec.json.Decoder(_Object)

    async def writer() -> None:
        # A bare HTTP/1.1 keep-alive client: the load generator must cost far less CPU than
        # the server it measures (two cores here), which aiohttp's client does not.
        reader, stream = await asyncio.open_connection(host, int(port))
        try:
            for i in counter:
                due = started + i * interval
                delay = due - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                name = f"worker-{i % pods:05d}"
                ns = f"team-{(i % pods) % NAMESPACES}"
                body = msgspec.json.encode({"metadata": {"annotations": {"bench/seq": str(i)}}})
                stream.write(
                    f"PATCH {PODS.format(ns=ns)}/{name} HTTP/1.1\r\nHost: {host}\r\n"
                    f"Content-Type: application/merge-patch+json\r\n{credentials}"
                    f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                status = await reader.readline()
                length = 0
                while (line := await reader.readline()) != b"\r\n":
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                payload = await reader.readexactly(length)
                if not status.startswith(b"HTTP/1.1 200"):
                    raise RuntimeError(f"patch failed: {status!r} {payload[:200]!r}")
                sent[decoder.decode(payload).metadata.resourceVersion] = time.perf_counter()
        finally:
            stream.close()

    await asyncio.gather(*(writer() for _ in range(concurrency)))
    write_time = time.perf_counter() - started
    try:
        await asyncio.wait_for(asyncio.gather(*(s.done.wait() for s in states)), 60)
        complete = 1.0
    except TimeoutError:
        complete = 0.0
    total_time = time.perf_counter() - started
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    lags = sorted(lag for s in states for lag in s.lags)
    received = sum(s.received for s in states)
    return {
        "writes": writes,
        "write_rate": writes / write_time,
        "events_per_s": received / total_time,
        # NaN (no figure, no key) when no watcher received anything.
        "lag_p50_ms": 1000 * percentile(lags, 0.5),
        "lag_p99_ms": 1000 * percentile(lags, 0.99),
        "lag_max_ms": 1000 * max(lags, default=math.nan),
        "complete": complete,
        "received": received,
    }


async def populate(session: aiohttp.ClientSession, url: str, args: argparse.Namespace) -> Rows:
    namespaces: list[tuple[str, dict[str, object]]] = [
        ("/api/v1/namespaces", {"metadata": {"name": f"team-{n}"}}) for n in range(NAMESPACES)
    ]
    await post_all(session, url, namespaces, 4)
    t_nodes = await post_all(
        session, url, [("/api/v1/nodes", node(i)) for i in range(args.nodes)], 32
    )
    pod_bodies = [
        (PODS.format(ns=f"team-{i % NAMESPACES}"), pod(i, args.nodes)) for i in range(args.pods)
    ]
    t_pods = await post_all(session, url, pod_bodies, 32)
    return Rows(
        [
            ("create nodes", f"{args.nodes} in {t_nodes:.1f} s ({args.nodes / t_nodes:.0f}/s)"),
            ("create pods", f"{args.pods} in {t_pods:.1f} s ({args.pods / t_pods:.0f}/s)"),
        ],
        {"create_pods_per_s": args.pods / t_pods},
    )


@dataclass
class Rows:
    """Table rows and the figures behind them."""

    rows: list[tuple[str, str]]
    figures: dict[str, float]


async def median_list(
    session: aiohttp.ClientSession, url: str, args: argparse.Namespace
) -> tuple[float, bytes]:
    lists: list[float] = []
    body = b""
    for _ in range(args.repeat):
        elapsed, body = await timed_get(session, url + "/api/v1/pods")
        lists.append(elapsed)
    return 1000 * statistics.median(lists), body


async def measure_lists(session: aiohttp.ClientSession, url: str, args: argparse.Namespace) -> Rows:
    list_ms, body = await median_list(session, url, args)
    decode_started = time.perf_counter()
    decoded = msgspec.json.decode(body, type=_PodList)
    decode_s = time.perf_counter() - decode_started
    assert len(decoded.items) == args.pods
    paged_s, paged_items = await paged_walk(session, url + "/api/v1/pods", 500)
    assert paged_items == args.pods
    by_node, _ = await timed_get(
        session, url + "/api/v1/pods", {"fieldSelector": "spec.nodeName=node-0007"}
    )
    by_label, _ = await timed_get(
        session, url + "/api/v1/pods", {"labelSelector": "app=job-7,index in (1,2)"}
    )
    nodes_s, _ = await timed_get(session, url + "/api/v1/nodes")
    rows = [
        (
            f"LIST {args.pods} pods (median of {args.repeat})",
            f"{list_ms:.0f} ms, {len(body) / 1e6:.1f} MB",
        ),
        ("  client msgspec decode", f"{1000 * decode_s:.0f} ms"),
        ("LIST pods, limit=500 pages", f"{1000 * paged_s:.0f} ms total"),
        ("LIST pods by spec.nodeName", f"{1000 * by_node:.1f} ms"),
        ("LIST pods by label", f"{1000 * by_label:.1f} ms"),
        (f"LIST {args.nodes} nodes", f"{1000 * nodes_s:.0f} ms"),
    ]
    return Rows(rows, {"list_ms": list_ms, "paged_s": paged_s, "by_node": by_node})


def fan_rows(fan: dict[str, float], args: argparse.Namespace, label: str = "") -> Rows:
    rows = [
        (
            f"writes{label} (target {args.rate:.0f}/s)",
            f"{fan['writes']:.0f} at {fan['write_rate']:.0f}/s",
        ),
        (
            f"events to {args.watchers} watchers{label}",
            f"{fan['received']:.0f} at {fan['events_per_s']:.0f}/s",
        ),
        (
            f"delivery lag p50 / p99 / max{label}",
            " / ".join(
                fixed(fan[key], 0) or "-" for key in ("lag_p50_ms", "lag_p99_ms", "lag_max_ms")
            )
            + (" ms" if fan["received"] else " (no event received)"),
        ),
        (f"all watchers got every event{label}", "yes" if fan["complete"] else "NO"),
    ]
    return Rows(rows, fan)


async def run_plain(tmp: Path, args: argparse.Namespace) -> Rows:
    """Every figure without authorization (the emulator's default)."""
    proc, url = await start_server(tmp, authz=False)
    try:
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as session:
            created = await populate(session, url, args)
            rss_loaded = rss_mb(proc.pid)
            lists = await measure_lists(session, url, args)
            fan = await fan_out(session, url, args.pods, args.watchers, args.rate, args.duration)
            fans = fan_rows(fan, args)
            rss_end = rss_mb(proc.pid)
    finally:
        proc.terminate()
        await proc.wait()
    memory = ("emulator RSS loaded / end", f"{rss_loaded:.0f} / {rss_end:.0f} MB")
    return Rows(
        created.rows + lists.rows + fans.rows + [memory],
        {**created.figures, **lists.figures, **fans.figures, "rss_end": rss_end},
    )


async def bench_token(session: aiohttp.ClientSession, url: str) -> str:
    """A ServiceAccount allowed (through a ClusterRoleBinding) what the benchmark does."""
    steps: list[tuple[str, dict[str, object]]] = [
        ("/api/v1/namespaces/team-0/serviceaccounts", {"metadata": {"name": "bench"}}),
        (f"{RBAC}/clusterroles", {"metadata": {"name": "bench"}, "rules": BENCH_RULES}),
        (
            f"{RBAC}/clusterrolebindings",
            {
                "metadata": {"name": "bench"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "bench",
                },
                "subjects": [{"kind": "ServiceAccount", "name": "bench", "namespace": "team-0"}],
            },
        ),
    ]
    await post_all(session, url, steps, 1)
    path = "/api/v1/namespaces/team-0/serviceaccounts/bench/token"
    async with session.post(url + path, json={"spec": {}}) as resp:
        assert resp.status == 201, await resp.text()
        token: str = (await resp.json())["status"]["token"]
    return token


async def run_authz(tmp: Path, args: argparse.Namespace) -> Rows:
    """LIST and fan-out again, authenticated with a ServiceAccount token through RBAC."""
    proc, url = await start_server(tmp, authz=True)
    try:
        async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0), headers=ADMIN
        ) as admin:
            await populate(admin, url, args)
            token = await bench_token(admin, url)
        headers = {"Authorization": f"Bearer {token}"}
        async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0), headers=headers
        ) as session:
            list_ms, _ = await median_list(session, url, args)
            fan = await fan_out(
                session,
                url,
                args.pods,
                args.watchers,
                args.rate,
                args.duration,
                credentials=f"Authorization: Bearer {token}\r\n",
            )
    finally:
        proc.terminate()
        await proc.wait()
    row = (f"LIST {args.pods} pods, RBAC (median of {args.repeat})", f"{list_ms:.0f} ms")
    fans = fan_rows(fan, args, ", RBAC")
    return Rows([row, *fans.rows], {"list_ms": list_ms, **fans.figures})


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="kubeapi-bench-") as tmp:
        plain = await run_plain(Path(tmp), args)
        authz = await run_authz(Path(tmp), args)
    rows = plain.rows + authz.rows
    off, on = plain.figures, authz.figures
    ratio = on["list_ms"] / off["list_ms"]
    rows.append(("RBAC on / off, LIST", f"{ratio:.2f}"))
    print("\n".join(measure_table(rows, rule=30)))
    print(result_line(figures(args, off, on)))


def figures(
    args: argparse.Namespace, off: dict[str, float], on: dict[str, float]
) -> list[tuple[str, str | int | None]]:
    """The RESULT figures from the runs without (``off``) and with (``on``) RBAC; a lag of no
    event received has no key."""
    return [
        (f"list_{args.pods // 1000}k_pods_ms", fixed(off["list_ms"], 0)),
        ("list_pods_paged_ms", fixed(1000 * off["paged_s"], 0)),
        ("list_pods_by_node_ms", fixed(1000 * off["by_node"], 1)),
        ("create_pods_per_s", fixed(off["create_pods_per_s"], 0)),
        ("watchers", args.watchers),
        ("writes_per_s", fixed(off["write_rate"], 0)),
        ("watch_events_per_s", fixed(off["events_per_s"], 0)),
        ("watch_lag_p99_ms", fixed(off["lag_p99_ms"], 0)),
        ("watchers_kept_up", int(off["complete"])),
        ("rss_mb", fixed(off["rss_end"], 0)),
        (f"list_{args.pods // 1000}k_pods_authz_ms", fixed(on["list_ms"], 0)),
        ("watch_lag_p99_authz_ms", fixed(on["lag_p99_ms"], 0)),
        ("writes_per_s_authz", fixed(on["write_rate"], 0)),
        ("watchers_kept_up_authz", int(on["complete"])),
        ("authz_overhead_ratio", fixed(on["list_ms"] / off["list_ms"], 2)),
    ]


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--watchers", type=int, default=10)
    parser.add_argument("--rate", type=float, default=1000.0, help="writes per second")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds of writes")
    parser.add_argument("--repeat", type=int, default=5, help="LIST repetitions")
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse()))
