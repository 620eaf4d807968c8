"""Benchmark of the Kubernetes API emulator: LIST latency, watch fan-out, memory.

Runs the emulator standalone (``python -m sim.kubeapi``) in its own process, stores
2,000 nodes and 20,000 pods through the API, then measures LIST latencies (whole,
paginated, by node, by label) and the fan-out of 1,000 writes/s to 10 watchers
(delivery rate and lag). Then it does the same against a second emulator that enforces
authentication and RBAC (``enforce_auth``, plain HTTP so that only authorization differs),
as a ServiceAccount whose ClusterRole allows what the benchmark does. Prints a table and
ends with one ``RESULT`` line.

Then the cluster-size scenario (``_kubeapi_scale``): 256 racks (4,608 nodes), 20,000 pods,
one pod watch (by node) and one node watch (by clique label) per node plus a few cluster-wide
ones, pods created through a mutating webhook.

Targets: LIST of 20,000 pods under 1 s; 10 watchers keep up with 1,000 writes/s; RBAC
costs under 20 % on the LIST (``authz_overhead_ratio`` < 1.2).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import msgspec

from bench._kubeapi_client import (
    Rows,
    finish_watches,
    paced_patches,
    pod_path,
    populate,
    post_all,
    rss_mb,
    start_server,
    stop_server,
    timed_get,
    watch_lines,
)
from bench._kubeapi_scale import run_scale, scale_figures
from bench._report import fixed, measure_table, percentile, result_line


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
    async with session.get(
        url, params=params, timeout=aiohttp.ClientTimeout(total=None, sock_read=60)
    ) as resp:
        async for now, lines in watch_lines(resp):
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
    decoder = msgspec.json.Decoder(_Object)

    def answered(_: int, payload: bytes) -> None:
        sent[decoder.decode(payload).metadata.resourceVersion] = time.perf_counter()

    started = time.perf_counter()
    write_time = await paced_patches(
        url,
        target=lambda i: pod_path(i % pods),
        count=writes,
        rate=rate,
        answered=answered,
        credentials=credentials,
    )
    complete = float(await finish_watches([s.done for s in states], tasks))
    total_time = time.perf_counter() - started
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
            created = await populate(session, url, args.nodes, args.pods)
            rss_loaded = rss_mb(proc.pid)
            lists = await measure_lists(session, url, args)
            fan = await fan_out(session, url, args.pods, args.watchers, args.rate, args.duration)
            fans = fan_rows(fan, args)
            rss_end = rss_mb(proc.pid)
    finally:
        await stop_server(proc)
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
            await populate(admin, url, args.nodes, args.pods)
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
        await stop_server(proc)
    row = (f"LIST {args.pods} pods, RBAC (median of {args.repeat})", f"{list_ms:.0f} ms")
    fans = fan_rows(fan, args, ", RBAC")
    return Rows([row, *fans.rows], {"list_ms": list_ms, **fans.figures})


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="kubeapi-bench-") as tmp:
        plain = await run_plain(Path(tmp), args)
        authz = await run_authz(Path(tmp), args)
        scale = await run_scale(Path(tmp), args) if args.scale_racks else None
    rows = plain.rows + authz.rows
    off, on = plain.figures, authz.figures
    ratio = on["list_ms"] / off["list_ms"]
    rows.append(("RBAC on / off, LIST", f"{ratio:.2f}"))
    if scale is not None:
        rows += scale.rows
    print("\n".join(measure_table(rows, rule=30)))
    print(result_line(figures(args, off, on, scale.figures if scale else None)))


def figures(
    args: argparse.Namespace,
    off: dict[str, float],
    on: dict[str, float],
    scale: dict[str, float] | None = None,
) -> list[tuple[str, str | int | None]]:
    """The RESULT figures from the runs without (``off``) and with (``on``) RBAC, then those of
    the cluster-size scenario when it ran; a lag of no event received has no key."""
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
        *(scale_figures(args, scale) if scale is not None else []),
    ]


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--watchers", type=int, default=10)
    parser.add_argument("--rate", type=float, default=1000.0, help="writes per second")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds of writes")
    parser.add_argument("--repeat", type=int, default=5, help="LIST repetitions")
    parser.add_argument(
        "--scale-racks",
        type=int,
        default=256,
        help="racks of 18 nodes in the cluster-size scenario (0: skip it)",
    )
    parser.add_argument(
        "--scale-rate", type=float, default=500.0, help="pod patches per second at that size"
    )
    parser.add_argument(
        "--scale-node-rate",
        type=float,
        default=100.0,
        help="node patches per second at that size (each node's watch of its clique's nodes)",
    )
    parser.add_argument(
        "--scale-informers", type=int, default=3, help="cluster-wide pod watches at that size"
    )
    parser.add_argument(
        "--webhook-pods", type=int, default=2000, help="pods created through the webhook"
    )
    parser.add_argument(
        "--profile",
        type=Path,
        help="a directory: run the cluster-size scenario's emulator under cProfile, "
        "writing kubeapi-scale.prof there",
    )
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse()))
