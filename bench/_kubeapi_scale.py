"""The cluster-size scenario of ``bench.kubeapi``: 256 NVL72 racks (4,608 Nodes, 18 a clique)
and 20,000 Pods in one emulator, as a 256-rack cdo cluster puts them there.

Measures: the time to create the Nodes and the Pods; LIST of every Pod, of one node's Pods
(``fieldSelector=spec.nodeName=X``) and of one clique's Nodes (a label selector matching 18 of
4,608); two watch fan-outs, each with one watch per node plus a few cluster-wide informers:
every node's watch of its own Pods (a field selector, as each kubelet holds) while Pods are
patched, and every node's watch of its clique's Nodes (a label selector) while Nodes are
patched; for each, the events delivered per second and the delivery lag, from the moment a
write is sent to the moment a watcher has read its event; Pod creation through a mutating
admission webhook (a local HTTPS server answering with a JSONPatch); and the emulator's own
CPU seconds per phase. A library module of ``bench.kubeapi``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import math
import statistics
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
from aiohttp import web

from bench._kubeapi_client import (
    NAMESPACES,
    PODS,
    SEQ,
    CpuClock,
    Rows,
    finish_watches,
    paced_patches,
    pod,
    pod_path,
    populate,
    post_all,
    rss_mb,
    start_server,
    stop_server,
    timed_get,
    watch_lines,
)
from bench._report import fixed, percentile
from sim.kubeapi.admission.certificates import CertificateAuthority

RACK_NODES = 18
CLIQUE_LABEL = "nvidia.com/gpu.clique"
MUTATING = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
MUTATED_LABEL = "bench.cdo.nvidia.com/admitted"
SAMPLES = 20
"""Selector LISTs timed per kind (distinct nodes and cliques), reported as their median."""


class _Meta(msgspec.Struct):
    annotations: dict[str, str] = {}
    labels: dict[str, str] = {}


class _Object(msgspec.Struct):
    metadata: _Meta


class _Event(msgspec.Struct):
    type: str
    object: _Object


class _List(msgspec.Struct):
    items: list[_Object]


@dataclass
class ScaleWatcher:
    """One watch: what it must receive, what it did, and each event's lag in seconds."""

    expected: int
    received: int = 0
    lags: list[float] = field(default_factory=list)
    opened: asyncio.Event = field(default_factory=asyncio.Event)
    done: asyncio.Event = field(default_factory=asyncio.Event)


def clique(rack: int) -> str:
    return f"0f3e9a5c-1b2d-4c6e-8f00-{rack:012d}.1"


async def follow(
    session: aiohttp.ClientSession,
    url: str,
    params: dict[str, str],
    state: ScaleWatcher,
    sent: dict[int, float],
    gate: asyncio.Semaphore,
) -> None:
    """Read one watch until it has ``state.expected`` events; ``gate`` bounds the watches
    connecting at once (a burst of thousands of connects overflows the listen backlog)."""
    decoder = msgspec.json.Decoder(_Event)
    async with gate:
        resp = await session.get(
            url, params=params, timeout=aiohttp.ClientTimeout(total=None, sock_read=None)
        )
    state.opened.set()
    if state.received >= state.expected:
        state.done.set()
    try:
        async for now, lines in watch_lines(resp):
            for line in lines:
                event = decoder.decode(line)
                state.received += 1
                seq = event.object.metadata.annotations.get(SEQ)
                if seq is not None:
                    state.lags.append(now - sent[int(seq)])
            if state.received >= state.expected:
                state.done.set()
    finally:
        resp.release()


@dataclass(frozen=True)
class FanOut:
    """One fan-out: a watch per node on ``collection`` with its own selector, plus cluster-wide
    informers, while write ``i`` patches the object at ``target(i)``."""

    name: str
    collection: str
    selectors: list[dict[str, str]]
    expected: list[int]
    target: Callable[[int], str]


def pods_by_node(nodes: int, writes: int, args: argparse.Namespace) -> FanOut:
    """Each node's watch of its own Pods (a kubelet's), while Pods are patched."""
    expected = [0] * nodes
    for i in range(writes):
        expected[(i % args.pods) % nodes] += 1
    return FanOut(
        "pods",
        "/api/v1/pods",
        [{"fieldSelector": f"spec.nodeName=node-{n:04d}"} for n in range(nodes)],
        expected,
        lambda i: pod_path(i % args.pods),
    )


def nodes_by_clique(nodes: int, writes: int) -> FanOut:
    """Each node's watch of its clique's Nodes by label, while Nodes are patched."""
    per_clique = [0] * (nodes // RACK_NODES)
    for i in range(writes):
        per_clique[(i % nodes) // RACK_NODES] += 1
    return FanOut(
        "nodes",
        "/api/v1/nodes",
        [{"labelSelector": f"{CLIQUE_LABEL}={clique(n // RACK_NODES)}"} for n in range(nodes)],
        [per_clique[n // RACK_NODES] for n in range(nodes)],
        lambda i: f"/api/v1/nodes/node-{i % nodes:04d}",
    )


async def fan_out(
    session: aiohttp.ClientSession,
    url: str,
    plan: FanOut,
    args: argparse.Namespace,
    cpu: CpuClock,
    *,
    rate: float,
) -> dict[str, float]:
    """Open the watches of ``plan`` from the current resourceVersion, write at ``rate``, and
    time every event from the moment its write was sent to the moment a watcher read it."""
    async with session.get(url + plan.collection, params={"limit": "1"}) as resp:
        rv = (await resp.json())["metadata"]["resourceVersion"]
    writes = int(rate * args.duration)
    sent: dict[int, float] = {}
    gate = asyncio.Semaphore(64)
    watchers = [ScaleWatcher(expected) for expected in plan.expected]
    informers = [ScaleWatcher(writes) for _ in range(args.scale_informers)]
    collection = url + plan.collection
    base = {"watch": "true", "resourceVersion": rv}
    tasks = [
        asyncio.create_task(follow(session, collection, {**base, **query}, state, sent, gate))
        for query, state in zip(plan.selectors, watchers, strict=True)
    ] + [
        asyncio.create_task(follow(session, collection, base, state, sent, gate))
        for state in informers
    ]
    everyone = watchers + informers
    opening = time.perf_counter()
    await asyncio.gather(*(state.opened.wait() for state in everyone))
    open_s = time.perf_counter() - opening
    cpu.mark(f"{plan.name}_open")

    def before(i: int) -> None:
        sent[i] = time.perf_counter()

    started = time.perf_counter()
    write_s = await paced_patches(url, target=plan.target, count=writes, rate=rate, before=before)
    complete = float(await finish_watches([s.done for s in everyone], tasks))
    total_s = time.perf_counter() - started
    cpu.mark(f"{plan.name}_fan")
    own_lags = [lag for s in watchers for lag in s.lags]
    informer_lags = [lag for s in informers for lag in s.lags]
    received = sum(s.received for s in everyone)
    return {
        "watches": len(everyone),
        "open_s": open_s,
        "writes": writes,
        "write_rate": writes / write_s,
        "received": received,
        "expected": sum(s.expected for s in everyone),
        "events_per_s": received / total_s,
        "lag_p50_ms": 1000 * percentile(own_lags + informer_lags, 0.5),
        "lag_p99_ms": 1000 * percentile(own_lags + informer_lags, 0.99),
        "own_lag_p99_ms": 1000 * percentile(own_lags, 0.99),
        "informer_lag_p99_ms": 1000 * percentile(informer_lags, 0.99),
        "lag_max_ms": 1000 * max(own_lags + informer_lags, default=math.nan),
        "complete": complete,
    }


# -- the mutating webhook --------------------------------------------------------------------


async def _admit(request: web.Request) -> web.Response:
    """Allow, adding one label with a JSONPatch (what a defaulting webhook does)."""
    review = await request.json()
    req = review["request"]
    labels = ((req.get("object") or {}).get("metadata") or {}).get("labels") or {}
    ops = [{"op": "add", "path": "/metadata/labels", "value": {**labels, MUTATED_LABEL: "yes"}}]
    response = {
        "uid": req["uid"],
        "allowed": True,
        "patchType": "JSONPatch",
        "patch": base64.b64encode(json.dumps(ops).encode()).decode(),
    }
    return web.json_response(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
    )


@asynccontextmanager
async def webhook_server() -> AsyncIterator[dict[str, Any]]:
    """A local HTTPS mutating webhook; yields its ``clientConfig``."""
    authority = CertificateAuthority()
    pair = authority.issue(["127.0.0.1"])
    app = web.Application()
    app.router.add_post("/mutate", _admit)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=pair.server_context())
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield {
            "url": f"https://127.0.0.1:{port}/mutate",
            "caBundle": base64.b64encode(authority.cert_pem).decode(),
        }
    finally:
        await runner.cleanup()


async def create_through_webhook(
    session: aiohttp.ClientSession, url: str, nodes: int, args: argparse.Namespace
) -> float:
    """Seconds to create ``args.webhook_pods`` more Pods, each admitted by the webhook."""
    async with webhook_server() as client_config:
        hook = {
            "name": "admit.bench.cdo.nvidia.com",
            "clientConfig": client_config,
            "rules": [
                {
                    "operations": ["CREATE"],
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "resources": ["pods"],
                }
            ],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "failurePolicy": "Fail",
        }
        config: dict[str, object] = {"metadata": {"name": "bench"}, "webhooks": [hook]}
        await post_all(session, url, [(MUTATING, config)], 1)
        first = args.pods
        bodies = [
            (PODS.format(ns=f"team-{i % NAMESPACES}"), pod(i, nodes))
            for i in range(first, first + args.webhook_pods)
        ]
        seconds = await post_all(session, url, bodies, 32)
    path = PODS.format(ns=f"team-{first % NAMESPACES}") + f"/worker-{first:05d}"
    _, body = await timed_get(session, url + path)
    admitted = msgspec.json.decode(body, type=_Object)
    assert admitted.metadata.labels.get(MUTATED_LABEL) == "yes", "the webhook did not mutate"
    return seconds


# -- the scenario ----------------------------------------------------------------------------


async def median_get(
    session: aiohttp.ClientSession, url: str, params: list[dict[str, str]], expected: int
) -> float:
    """Median milliseconds of one GET per ``params``; each must list ``expected`` items."""
    times = []
    for query in params:
        elapsed, body = await timed_get(session, url, query)
        got = len(msgspec.json.decode(body, type=_List).items)
        assert got == expected, f"{query}: {got} items, expected {expected}"
        times.append(elapsed)
    return 1000 * statistics.median(times)


async def measure_lists(
    session: aiohttp.ClientSession, url: str, nodes: int, args: argparse.Namespace
) -> dict[str, float]:
    racks = nodes // RACK_NODES
    pods_url, nodes_url = url + "/api/v1/pods", url + "/api/v1/nodes"
    # Every node carries the same number of pods, give or take one.
    per_node = args.pods // nodes
    spread = [(n * 7919) % nodes for n in range(SAMPLES)]
    by_node = [
        {"fieldSelector": f"spec.nodeName=node-{n:04d}"} for n in spread if n >= args.pods % nodes
    ]
    by_clique = [
        {"labelSelector": f"{CLIQUE_LABEL}={clique((r * 31) % racks)}"} for r in range(SAMPLES)
    ]
    return {
        "list_pods_ms": await median_get(session, pods_url, [{}] * args.repeat, args.pods),
        "by_node_ms": await median_get(session, pods_url, by_node, per_node),
        "by_clique_ms": await median_get(session, nodes_url, by_clique, RACK_NODES),
        "list_nodes_ms": await median_get(session, nodes_url, [{}] * args.repeat, nodes),
    }


async def run_scale(tmp: Path, args: argparse.Namespace) -> Rows:
    nodes = args.scale_racks * RACK_NODES
    profile = args.profile / "kubeapi-scale.prof" if args.profile else None
    proc, url = await start_server(tmp, authz=False, name="kubeconfig-scale", profile=profile)
    try:
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as session:
            cpu = CpuClock(proc.pid)
            created = await populate(session, url, nodes, args.pods)
            cpu.mark("create")
            lists = await measure_lists(session, url, nodes, args)
            cpu.mark("lists")
            pods_writes = int(args.scale_rate * args.duration)
            fan = await fan_out(
                session, url, pods_by_node(nodes, pods_writes, args), args, cpu,
                rate=args.scale_rate,
            )  # fmt: skip
            node_writes = int(args.scale_node_rate * args.duration)
            cliques = await fan_out(
                session, url, nodes_by_clique(nodes, node_writes), args, cpu,
                rate=args.scale_node_rate,
            )  # fmt: skip
            webhook_s = await create_through_webhook(session, url, nodes, args)
            cpu.mark("webhook")
            rss_end = rss_mb(proc.pid)
    finally:
        await stop_server(proc)
    figures = {
        **created.figures,
        **lists,
        **{f"fan_{key}": value for key, value in fan.items()},
        **{f"clique_{key}": value for key, value in cliques.items()},
        "webhook_pods_per_s": args.webhook_pods / webhook_s,
        "rss_end": rss_end,
        **{f"cpu_{phase}_s": seconds for phase, seconds in cpu.spent.items()},
    }
    return Rows(scale_rows(figures, nodes, args), figures)


def fan_rows(f: dict[str, float], prefix: str, label: str, rate: float) -> list[tuple[str, str]]:
    lags = " / ".join(
        fixed(f[f"{prefix}_{key}"], 0) or "-" for key in ("lag_p50_ms", "lag_p99_ms", "lag_max_ms")
    )
    return [
        (f"{label}: open {f[f'{prefix}_watches']:.0f} watches", f"{f[f'{prefix}_open_s']:.1f} s"),
        (
            f"{label}: patches (target {rate:.0f}/s)",
            f"{f[f'{prefix}_writes']:.0f} at {f[f'{prefix}_write_rate']:.0f}/s",
        ),
        (
            f"{label}: events delivered",
            f"{f[f'{prefix}_received']:.0f} of {f[f'{prefix}_expected']:.0f} "
            f"at {f[f'{prefix}_events_per_s']:.0f}/s",
        ),
        (f"{label}: send-to-read lag p50 / p99 / max", f"{lags} ms"),
        (
            f"{label}: lag p99 selective / informers",
            f"{fixed(f[f'{prefix}_own_lag_p99_ms'], 0) or '-'} / "
            f"{fixed(f[f'{prefix}_informer_lag_p99_ms'], 0) or '-'} ms",
        ),
        (f"{label}: every watch got every event", "yes" if f[f"{prefix}_complete"] else "NO"),
    ]


def scale_rows(f: dict[str, float], nodes: int, args: argparse.Namespace) -> list[tuple[str, str]]:
    size = f"[{args.scale_racks} racks]"
    phases = ("create", "lists", "pods_open", "pods_fan", "nodes_open", "nodes_fan", "webhook")
    return [
        (f"{size} create {nodes} nodes", f"{f['create_nodes_s']:.1f} s"),
        (f"{size} create {args.pods} pods", f"{f['create_pods_s']:.1f} s"),
        (f"{size} LIST {args.pods} pods (median)", f"{f['list_pods_ms']:.0f} ms"),
        (f"{size} LIST pods by spec.nodeName", f"{f['by_node_ms']:.1f} ms"),
        (f"{size} LIST nodes of one clique", f"{f['by_clique_ms']:.1f} ms"),
        (f"{size} LIST {nodes} nodes (median)", f"{f['list_nodes_ms']:.0f} ms"),
        *fan_rows(f, "fan", f"{size} pods by node", args.scale_rate),
        *fan_rows(f, "clique", f"{size} nodes by clique", args.scale_node_rate),
        (
            f"{size} create {args.webhook_pods} pods via webhook",
            f"{f['webhook_pods_per_s']:.0f}/s",
        ),
        (
            f"{size} emulator CPU s: " + " / ".join(phases),
            " / ".join(f"{f[f'cpu_{phase}_s']:.1f}" for phase in phases),
        ),
        (f"{size} emulator RSS end", f"{f['rss_end']:.0f} MB"),
    ]


def scale_figures(
    args: argparse.Namespace, f: dict[str, float]
) -> list[tuple[str, str | int | None]]:
    """The RESULT figures of the scenario, keyed by its rack count."""
    r = args.scale_racks
    return [
        (f"create_nodes_s_{r}racks", fixed(f["create_nodes_s"], 1)),
        (f"create_pods_s_{r}racks", fixed(f["create_pods_s"], 1)),
        (f"list_pods_ms_{r}racks", fixed(f["list_pods_ms"], 0)),
        (f"list_pods_by_node_ms_{r}racks", fixed(f["by_node_ms"], 1)),
        (f"list_nodes_by_clique_ms_{r}racks", fixed(f["by_clique_ms"], 1)),
        (f"watch_open_s_{r}racks", fixed(f["fan_open_s"], 1)),
        (f"watch_events_per_s_{r}racks", fixed(f["fan_events_per_s"], 0)),
        (f"watch_lag_p99_ms_{r}racks", fixed(f["fan_lag_p99_ms"], 0)),
        (f"watchers_kept_up_{r}racks", int(f["fan_complete"])),
        (f"clique_watch_events_per_s_{r}racks", fixed(f.get("clique_events_per_s"), 0)),
        (f"clique_watch_lag_p99_ms_{r}racks", fixed(f.get("clique_lag_p99_ms"), 0)),
        (f"clique_watchers_kept_up_{r}racks", int(f.get("clique_complete", 0))),
        (f"webhook_create_pods_per_s_{r}racks", fixed(f["webhook_pods_per_s"], 0)),
        (f"rss_mb_{r}racks", fixed(f["rss_end"], 0)),
        (f"create_cpu_s_{r}racks", fixed(f.get("cpu_create_s"), 1)),
        (f"watch_open_cpu_s_{r}racks", fixed(f.get("cpu_pods_open_s"), 2)),
        (f"fan_out_cpu_s_{r}racks", fixed(f.get("cpu_pods_fan_s"), 2)),
        (f"clique_fan_out_cpu_s_{r}racks", fixed(f.get("cpu_nodes_fan_s"), 2)),
    ]
