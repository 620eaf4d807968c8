"""How cdo's cost grows with the cluster: ``python -m bench.scale --racks 4,16,64,256``.

For each size, one after another, in one run: ``cdo sim up --racks N --full-racks M`` (hollow
racks, docs/simulator.md#hollow-racks; the control plane with Kubernetes' default leader
election timings, 15 s lease and 10 s renew deadline, as large clusters need), then

1. **load**: Deployments of 100 pods without GPUs, ``--pods-per-node`` per node (4.3: about
   20,000 pods at 256 racks; at most 3,000 per namespace, Kubernetes' threshold), until every
   one runs or ``--load-timeout`` passes (the pods reached are the ones counted);
2. **seeds**: ``--seeds`` domains of 18 pods x 4 GPUs, one after another, each pinned to the
   first rack (``nodeSelector`` on its ``cdo.dev/nvlink-domain``: a full rack, so the per-node
   services below do a domain's work), timed from the create to Ready with every pod Running,
   then deleted;
3. **big domain**: one domain of ``--big-pods`` pods x 4 GPUs (64: 256 GPUs over four racks;
   capped at the cluster's nodes), not pinned, timed the same way;
4. the per-node services' own metrics on every full-rack node (the node host's
   ``/nodes/<node>/metrics/<service>``): API requests (``rest_client_requests_total``) and
   watch events applied to their informers (``cdo_informer_events_total``) of the IMEX agent
   and the health monitor of one node together, per minute, over steps 1 to 3 and
   ``--window`` seconds at rest after them (the mean over the full-rack nodes: their own
   domains' work, and whatever of the rest of the cluster reaches them); the domain
   controller's and the allocator's RSS and CPU seconds
   since they started (``/proc``); the allocator's placement decision p99
   (``cdo_placement_decision_seconds``, interpolated in its bucket as PromQL's
   ``histogram_quantile`` does);
5. **relist**: ``cdo sim restart control-plane``, and for each service the seconds from its new
   process's start to ready (informers synced) and leading again.

Prints one table, one row per size, the targets of issue 31 (comparing the smallest and the
largest size run) and one line ``RESULT key=value ...`` with the size in each key:
``nodes_<N>``, ``pods_<N>``, ``gpus_<N>``, ``agent_api_requests_per_min_<N>``,
``agent_watch_events_per_min_<N>``, ``controller_rss_mb_<N>``, ``controller_cpu_s_<N>``,
``allocator_rss_mb_<N>``, ``allocator_cpu_s_<N>``, ``placement_p99_ms_<N>``,
``seed_ready_p50_s_<N>``, ``seed_ready_max_s_<N>``, ``big_domain_pods_<N>``,
``big_domain_ready_s_<N>``, ``controller_relist_s_<N>``, ``allocator_relist_s_<N>``,
``relist_s_<N>`` (the slower of the two), and from the nats-server's monitoring endpoint
over the size's whole run ``nats_in_msgs_per_s_<N>``, ``nats_stored_msgs_<N>``,
``nats_stored_bytes_<N>`` (JetStream) and ``nats_connections_<N>`` (hollow nodes have no NATS
connection: these are the full racks' and the control plane's). A figure not measured has no
key; seeds that timed
out count in ``seed_ready_timed_out_<N>``, a big domain that did not become Ready prints
``big_domain_ready_timed_out_<N>=1``.

    python -m bench.scale [--racks 2,4] [--full-racks 1] [--pods-per-node 4.3] [--seeds 3]
                          [--big-pods 64] [--window 30] [--timeout 300]
                          [--load-timeout 600]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import math
import os
import shutil
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from bench._e2e_workloads import DEFAULT_IMAGE, compute_domain, gpu_deployment
from bench._promtext import (
    counter_sum,
    gauge_value,
    histogram_buckets,
    histogram_quantile,
    scrape,
)
from bench._report import Runs, fixed, result_line
from bench.hollow import (
    CLK_TCK,
    cpu_ticks,
    domain_ready,
    nvlink_domain,
    processes,
    rss_mb,
    up_options,
)
from shared.crds import COMPUTE_DOMAINS, COMPUTE_DOMAINS_V1BETA1
from shared.crds.names import NVLINK_DOMAIN_LABEL
from shared.kube.client import KubeClient
from shared.kube.resources import DEPLOYMENTS, NAMESPACES, PODS
from sim import control as simctl
from sim.control.state import read_controlplane, read_nodehost, read_record

NAMESPACE = "scale-bench"
RACK_NODES = 18
GPUS_PER_NODE = 4
SEED_PODS = 18
LOAD_DEPLOYMENT_PODS = 100
"""Pods per load Deployment: the load is many Deployments, as many workloads are (one of 500
pods overran the simulated ReplicaSet controller's 60 s reconcile at 256 racks)."""
LOAD_NAMESPACE_PODS = 3000
"""Pods per load namespace: Kubernetes' scalability threshold of pods per namespace
(sig-scalability/configs-and-limits/thresholds.md)."""
LOAD_LABEL = "cdo.dev/scale-load"
PER_NODE_SERVICES = ("imex-agent", "health-monitor")
CONTROL_PLANE = {"domain-controller": "controller", "clique-allocator": "allocator"}
POLL_S = 0.5
# Kubernetes' defaults (client-go's leader election): the simulator's short leases run out
# while a large cluster's first LISTs are served (docs/simulator.md#hollow-racks).
LEADER_ELECTION_ENV = {
    f"CDO_{service}_LEADER_ELECTION_{setting}": value
    for service in ("CLIQUE_ALLOCATOR", "DOMAIN_CONTROLLER")
    for setting, value in (
        ("LEASE_DURATION_S", "15"),
        ("RENEW_DEADLINE_S", "10"),
        ("RETRY_PERIOD_S", "2"),
    )
}

Say = Callable[[str], None]


@dataclass(frozen=True)
class Options:
    full_racks: int = 1
    pods_per_node: float = 4.3
    seeds: int = 3
    big_pods: int = 64
    window_s: float = 30.0
    timeout_s: float = 300.0
    load_timeout_s: float = 600.0


@dataclass
class SizeFigures:
    """What one size measured; None where a figure was not measured."""

    racks: int
    pods: int = 0
    load_s: float | None = None
    requests_per_min: float | None = None
    events_per_min: float | None = None
    rss_mb: dict[str, float] = field(default_factory=dict)
    cpu_s: dict[str, float] = field(default_factory=dict)
    placement_p99_ms: float | None = None
    seeds: Runs = field(default_factory=Runs)
    big_pods: int = 0
    big_s: float | None = None
    relist_s: dict[str, float] = field(default_factory=dict)
    nats: NatsTraffic | None = None

    @property
    def nodes(self) -> int:
        return self.racks * RACK_NODES

    @property
    def gpus(self) -> int:
        return self.nodes * GPUS_PER_NODE

    def figures(self) -> list[tuple[str, str | None]]:
        """The RESULT figures of this size, each key ending in ``_<racks>``."""
        n = self.racks
        out: list[tuple[str, str | None]] = [
            (f"nodes_{n}", str(self.nodes)),
            (f"pods_{n}", str(self.pods)),
            (f"gpus_{n}", str(self.gpus)),
            (f"agent_api_requests_per_min_{n}", fixed(self.requests_per_min, 1)),
            (f"agent_watch_events_per_min_{n}", fixed(self.events_per_min, 1)),
        ]
        for service in ("controller", "allocator"):
            out += [
                (f"{service}_rss_mb_{n}", fixed(self.rss_mb.get(service), 0)),
                (f"{service}_cpu_s_{n}", fixed(self.cpu_s.get(service), 1)),
            ]
        out += [
            (f"placement_p99_ms_{n}", fixed(self.placement_p99_ms, 2)),
            (f"seed_ready_p50_s_{n}", fixed(self.seeds.p50, 2)),
            (f"seed_ready_max_s_{n}", fixed(self.seeds.high, 2)),
            (
                f"seed_ready_timed_out_{n}",
                str(self.seeds.timeouts) if self.seeds.timeouts else None,
            ),
            (f"big_domain_pods_{n}", str(self.big_pods) if self.big_pods else None),
            (f"big_domain_ready_s_{n}", fixed(self.big_s, 2)),
            (
                f"big_domain_ready_timed_out_{n}",
                "1" if self.big_pods and self.big_s is None else None,
            ),
        ]
        for service in ("controller", "allocator"):
            out += [(f"{service}_relist_s_{n}", fixed(self.relist_s.get(service), 2))]
        slowest = max(self.relist_s.values()) if len(self.relist_s) == 2 else None
        out += [(f"relist_s_{n}", fixed(slowest, 2))]
        if self.nats is not None:
            out += [
                (f"nats_in_msgs_per_s_{n}", fixed(self.nats.in_msgs_per_s, 2)),
                (f"nats_stored_msgs_{n}", str(self.nats.stored_msgs)),
                (f"nats_stored_bytes_{n}", str(self.nats.stored_bytes)),
                (f"nats_connections_{n}", str(self.nats.connections)),
            ]
        return out


# -- the table and the targets (pure) ----------------------------------------------------------

COLUMNS = (
    ("racks", 5),
    ("nodes", 6),
    ("pods", 6),
    ("GPUs", 6),
    ("req/min", 8),
    ("ev/min", 7),
    ("ctl MB", 7),
    ("ctl s", 7),
    ("alc MB", 7),
    ("alc s", 7),
    ("p99 ms", 7),
    ("18x4 p50", 9),
    ("18x4 max", 9),
    ("big", 4),
    ("big s", 7),
    ("ctl rel", 8),
    ("alc rel", 8),
)


def _cell(value: float | None, digits: int) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def table(rows: Sequence[SizeFigures]) -> list[str]:
    """One row per size; ``-`` where a figure was not measured, ``*`` on a p50 with seeds that
    timed out (they are not in it), ``t/o`` for a big domain that timed out."""
    header = " ".join(name.rjust(width) for name, width in COLUMNS)
    lines = [header, " ".join("-" * width for _, width in COLUMNS)]
    for row in rows:
        p50, _low, high = row.seeds.cells()
        big = "t/o" if row.big_pods and row.big_s is None else _cell(row.big_s, 1)
        cells = (
            str(row.racks),
            str(row.nodes),
            str(row.pods),
            str(row.gpus),
            _cell(row.requests_per_min, 1),
            _cell(row.events_per_min, 1),
            _cell(row.rss_mb.get("controller"), 0),
            _cell(row.cpu_s.get("controller"), 1),
            _cell(row.rss_mb.get("allocator"), 0),
            _cell(row.cpu_s.get("allocator"), 1),
            _cell(row.placement_p99_ms, 2),
            p50,
            high,
            str(row.big_pods or "-"),
            big,
            _cell(row.relist_s.get("controller"), 1),
            _cell(row.relist_s.get("allocator"), 1),
        )
        lines.append(
            " ".join(cell.rjust(width) for cell, (_, width) in zip(cells, COLUMNS, strict=True))
        )
    return lines


def targets(rows: Sequence[SizeFigures]) -> list[str]:
    """Issue 31's targets, the largest size run against the smallest: met, MISSED, or not
    measured (a figure missing, or a single size for a ratio)."""
    small, large = min(rows, key=lambda r: r.racks), max(rows, key=lambda r: r.racks)
    lines: list[str] = []

    def verdict(name: str, met: bool | None, shown: str) -> None:
        word = "not measured" if met is None else ("met" if met else "MISSED")
        lines.append(f"  {name:<58} {shown:<28} {word}")

    ratio_sizes = f"{large.racks} vs {small.racks} racks"
    if large is small:
        verdict("per-node watch events <= 1.2x", None, "one size only")
        verdict("18x4 domain Ready within 1.5x", None, "one size only")
    else:
        ev_large, ev_small = large.events_per_min, small.events_per_min
        met = None if ev_large is None or ev_small is None else ev_large <= 1.2 * ev_small
        shown = "-" if met is None else f"{ev_large:.1f} vs {ev_small:.1f} /min"
        verdict(f"per-node watch events/min, {ratio_sizes}, <= 1.2x", met, shown)
        ready = _ratio(large.seeds.p50, small.seeds.p50)
        met = None if large.seeds.timeouts else _at_most(ready, 1.5)
        verdict(f"18x4 domain Ready p50, {ratio_sizes}, <= 1.5x", met, _x(ready))
    for service in ("allocator", "controller"):
        rss = large.rss_mb.get(service)
        shown = "-" if rss is None else f"{rss:.0f} MB"
        verdict(
            f"{service} RSS at {large.racks} racks < 1 GB", _at_most(rss, 1024, strict=True), shown
        )
    p99 = large.placement_p99_ms
    verdict(
        f"placement p99 at {large.racks} racks < 5 ms",
        _at_most(p99, 5.0, strict=True),
        "-" if p99 is None else f"{p99:.2f} ms",
    )
    return lines


def _ratio(top: float | None, bottom: float | None) -> float | None:
    if top is None or bottom is None or bottom == 0:
        return None
    return top / bottom


def _x(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


def _at_most(value: float | None, limit: float, *, strict: bool = False) -> bool | None:
    if value is None or math.isnan(value):
        return None
    return value < limit if strict else value <= limit


# -- the per-node services' metrics -----------------------------------------------------------


@dataclass(frozen=True)
class NodeCounts:
    """The per-node services' request and watch event counters, summed over the full-rack
    nodes, at one moment."""

    at: float
    nodes: int
    requests: float
    events: float


def node_counts(state_dir: Path, full_racks: int) -> NodeCounts:
    host = read_nodehost(state_dir)
    assert host is not None, f"no node host runs in {state_dir}"
    names = [f"rack-{r}-tray{t:02d}" for r in range(full_racks) for t in range(RACK_NODES)]
    requests = events = 0.0
    for node in names:
        for service in PER_NODE_SERVICES:
            text = scrape(f"{host.control_url}/nodes/{node}/metrics/{service}")
            requests += counter_sum(text, "rest_client_requests")
            events += counter_sum(text, "cdo_informer_events")
    return NodeCounts(at=time.monotonic(), nodes=len(names), requests=requests, events=events)


def per_node_per_min(before: NodeCounts, after: NodeCounts) -> tuple[float, float]:
    minutes = (after.at - before.at) / 60
    nodes = after.nodes
    return (
        (after.requests - before.requests) / nodes / minutes,
        (after.events - before.events) / nodes / minutes,
    )


# -- the workloads -----------------------------------------------------------------------------


def load_deployments(pods: int) -> Iterator[dict[str, Any]]:
    """Deployments of pods without GPUs, ``LOAD_DEPLOYMENT_PODS`` each, ``pods`` in all, in
    namespaces ``scale-load-<k>`` of at most ``LOAD_NAMESPACE_PODS`` pods each."""
    index = 0
    per_namespace = LOAD_NAMESPACE_PODS // LOAD_DEPLOYMENT_PODS
    while pods > 0:
        replicas = min(pods, LOAD_DEPLOYMENT_PODS)
        name = f"load-{index}"
        yield {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": name,
                "namespace": f"scale-load-{index // per_namespace}",
                "labels": {LOAD_LABEL: "true"},
            },
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name, LOAD_LABEL: "true"}},
                    "spec": {
                        "containers": [
                            {
                                "name": "load",
                                "image": DEFAULT_IMAGE,
                                "command": ["sleep", "infinity"],
                            }
                        ]
                    },
                },
            },
        }
        pods -= replicas
        index += 1


class _DeploymentStatus(msgspec.Struct):
    readyReplicas: int = 0  # noqa: N815 - the API's field name


class _Deployment(msgspec.Struct):
    status: _DeploymentStatus = msgspec.field(default_factory=_DeploymentStatus)


class _Deployments(msgspec.Struct):
    items: list[_Deployment]


async def _ready_load_pods(client: KubeClient) -> int:
    raw = await client.list(DEPLOYMENTS, label_selector=f"{LOAD_LABEL}=true")
    listed = msgspec.json.decode(raw, type=_Deployments)
    return sum(item.status.readyReplicas for item in listed.items)


async def load(client: KubeClient, pods: int, *, timeout_s: float) -> tuple[int, float]:
    """Create the load and wait until it all runs (or the timeout): pods running, seconds."""
    started = time.monotonic()
    namespaces: set[str] = set()
    for deployment in load_deployments(pods):
        namespace = deployment["metadata"]["namespace"]
        if namespace not in namespaces:
            namespaces.add(namespace)
            manifest = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            await client.create(NAMESPACES, manifest)
        await client.create(DEPLOYMENTS, deployment, namespace=namespace)
    # The Deployments' readyReplicas tell cheaply when all run; they lag behind the pods on a
    # busy cluster, so what ran when the time is up is counted on the pods themselves.
    while time.monotonic() - started < timeout_s:
        if await _ready_load_pods(client) >= pods:
            return pods, time.monotonic() - started
        await asyncio.sleep(2.0)
    return await _running_load_pods(client), time.monotonic() - started


async def _running_load_pods(client: KubeClient) -> int:
    raw = await client.list(
        PODS, label_selector=f"{LOAD_LABEL}=true", field_selector="status.phase=Running"
    )
    return len(msgspec.json.decode(raw, type=_Items).items)


async def time_domain(
    client: KubeClient, name: str, *, pods: int, rack: str | None, timeout_s: float
) -> float | None:
    """Create a domain of ``pods`` pods x 4 GPUs (pinned to ``rack``'s NVLink domain when
    given); seconds from the create until Ready with every pod Running, None when not within
    ``timeout_s``. Deleted again either way, and waited for until its pods are gone."""
    deployment = gpu_deployment(
        name, NAMESPACE, domain=name, replicas=pods, gpus_per_pod=GPUS_PER_NODE
    )
    if rack is not None:
        selector = {NVLINK_DOMAIN_LABEL: await nvlink_domain(client, f"{rack}-tray00")}
        deployment["spec"]["template"]["spec"]["nodeSelector"] = selector
    started = time.monotonic()
    await client.create(
        COMPUTE_DOMAINS_V1BETA1, compute_domain(name, NAMESPACE), namespace=NAMESPACE
    )
    await client.create(DEPLOYMENTS, deployment, namespace=NAMESPACE)
    ready = await _until(
        lambda: domain_ready(client, name, namespace=NAMESPACE, pods=pods), timeout_s=timeout_s
    )
    seconds = time.monotonic() - started if ready else None
    await client.delete(DEPLOYMENTS, name, namespace=NAMESPACE, propagation="Foreground")
    await client.delete(COMPUTE_DOMAINS, name, namespace=NAMESPACE)
    await _until(lambda: _no_pods_left(client, name), timeout_s=timeout_s)
    return seconds


class _Named(msgspec.Struct):
    metadata: dict[str, object]


class _Items(msgspec.Struct):
    items: list[_Named]


async def _no_pods_left(client: KubeClient, app: str) -> bool:
    raw = await client.list(PODS, namespace=NAMESPACE, label_selector=f"app={app}")
    return not msgspec.json.decode(raw, type=_Items).items


async def _until(condition: Callable[[], Awaitable[bool]], *, timeout_s: float) -> bool:
    """Poll ``condition`` every ``POLL_S`` until it holds (True) or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while not await condition():
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(POLL_S)
    return True


# -- NATS ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NatsTraffic:
    """What the system's nats-server saw from its start (its monitoring endpoint: ``/varz``
    and ``/jsz``): messages in, what JetStream stores, connections."""

    uptime_s: float
    in_msgs: int
    in_bytes: int
    stored_msgs: int
    stored_bytes: int
    connections: int

    @property
    def in_msgs_per_s(self) -> float:
        return self.in_msgs / self.uptime_s


class _Varz(msgspec.Struct):
    start: str
    now: str
    in_msgs: int
    in_bytes: int
    connections: int


class _Jsz(msgspec.Struct):
    messages: int = 0
    bytes: int = 0


def nats_traffic(state_dir: Path) -> NatsTraffic | None:
    """The nats-server's counters; None when it serves no monitoring port."""
    pid = processes(state_dir).get("nats")
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if pid else []
    if b"--http_port" not in argv:
        return None
    base = f"http://127.0.0.1:{int(argv[argv.index(b'--http_port') + 1])}"
    with urllib.request.urlopen(base + "/varz", timeout=10) as response:
        varz = msgspec.json.decode(response.read(), type=_Varz)
    with urllib.request.urlopen(base + "/jsz", timeout=10) as response:
        jsz = msgspec.json.decode(response.read(), type=_Jsz)
    uptime = dt.datetime.fromisoformat(varz.now) - dt.datetime.fromisoformat(varz.start)
    return NatsTraffic(
        uptime_s=uptime.total_seconds(),
        in_msgs=varz.in_msgs,
        in_bytes=varz.in_bytes,
        stored_msgs=jsz.messages,
        stored_bytes=jsz.bytes,
        connections=varz.connections,
    )


# -- the control plane -------------------------------------------------------------------------


def control_plane_usage(state_dir: Path) -> tuple[dict[str, float], dict[str, float]]:
    """RSS (MB) and CPU seconds since start of the domain controller and the allocator."""
    pids = {
        name: pid for name, pid in processes(state_dir).items() if name in CONTROL_PLANE.values()
    }
    return (
        {name: rss_mb(pid) for name, pid in pids.items()},
        {name: cpu_ticks(pid) / CLK_TCK for name, pid in pids.items()},
    )


def placement_p99_ms(state_dir: Path) -> tuple[float | None, int]:
    """The allocator's placement decision p99 (ms; None without decisions) and how many
    decisions it is over."""
    plane = read_controlplane(state_dir)
    assert plane is not None
    text = scrape(plane.services["clique-allocator"].probe_url + "/metrics")
    buckets = histogram_buckets(text, "cdo_placement_decision_seconds")
    p99 = histogram_quantile(0.99, buckets)
    return (None if math.isnan(p99) else p99 * 1000), int(buckets[-1][1]) if buckets else 0


def _leading_and_ready(probe_url: str) -> bool:
    try:
        with urllib.request.urlopen(probe_url + "/readyz", timeout=2) as response:
            if response.status != 200:
                return False
        return gauge_value(scrape(probe_url + "/metrics"), "leader_election_master_status") == 1
    except (urllib.error.URLError, OSError):
        return False


def relist(state_dir: Path, *, timeout_s: float) -> dict[str, float]:
    """Restart the control plane (``cdo sim restart control-plane``); per service, seconds from
    its new process's start until it is ready (its informers synced) and leads."""
    before = read_controlplane(state_dir)
    assert before is not None
    old = {svc.pid for svc in before.services.values()}
    failure: list[BaseException] = []

    def restart() -> None:
        try:
            simctl.restart(state_dir, "control-plane", say=lambda _line: None, timeout_s=timeout_s)
        except BaseException as exc:  # reported below, after the poll
            failure.append(exc)

    worker = threading.Thread(target=restart, daemon=True)
    worker.start()
    seconds: dict[str, float] = {}
    deadline = time.monotonic() + timeout_s
    while len(seconds) < len(CONTROL_PLANE) and time.monotonic() < deadline and not failure:
        plane = read_controlplane(state_dir)
        for name, svc in plane.services.items() if plane else ():
            short = CONTROL_PLANE[name]
            if short in seconds or svc.pid in old or not svc.started_at:
                continue
            if _leading_and_ready(svc.probe_url):
                seconds[short] = time.time() - svc.started_at
        time.sleep(0.2)
    worker.join(timeout=timeout_s)
    if failure:
        raise failure[0]
    return seconds


# -- one size ----------------------------------------------------------------------------------


async def _loaded_figures(
    state_dir: Path, kubeconfig: str, row: SizeFigures, options: Options, say: Say
) -> None:
    client = await KubeClient.connect(kubeconfig=kubeconfig)
    try:
        await client.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
        before = await asyncio.to_thread(node_counts, state_dir, options.full_racks)
        wanted = round(row.nodes * options.pods_per_node)
        row.pods, row.load_s = await load(client, wanted, timeout_s=options.load_timeout_s)
        say(f"  load: {row.pods} of {wanted} pods running after {row.load_s:.0f} s")
        for index in range(options.seeds):
            seconds = await time_domain(
                client, f"seed-{index}", pods=SEED_PODS, rack="rack-0", timeout_s=options.timeout_s
            )
            if seconds is None:
                row.seeds.timeouts += 1
            else:
                row.seeds.seconds.append(seconds)
            say(f"  18x4 domain {index}: {'timed out' if seconds is None else f'{seconds:.1f} s'}")
        row.big_pods = min(options.big_pods, row.nodes)
        if row.big_pods:
            row.big_s = await time_domain(
                client, "big", pods=row.big_pods, rack=None, timeout_s=options.timeout_s
            )
            shown = "timed out" if row.big_s is None else f"{row.big_s:.1f} s"
            say(f"  {row.big_pods}x4 domain: {shown}")
        await asyncio.sleep(options.window_s)  # at rest, loaded
        after = await asyncio.to_thread(node_counts, state_dir, options.full_racks)
        row.requests_per_min, row.events_per_min = per_node_per_min(before, after)
    finally:
        await client.close()


def measure(racks: int, options: Options, *, say: Say) -> SizeFigures:
    """Bring ``racks`` racks up, measure them (the module docstring) and take them down."""
    state_dir = Path(tempfile.mkdtemp(prefix="cdo-scale-", dir="/tmp"))
    up = up_options(
        state_dir,
        racks=racks,
        full_racks=min(options.full_racks, racks),
        timeout_s=options.timeout_s,
    )
    row = SizeFigures(racks=racks)
    started = time.monotonic()
    say(f"{racks} racks:")
    try:
        simctl.up(up, say=lambda _line: None)
        say(f"  up in {time.monotonic() - started:.0f} s")
        record = read_record(state_dir)
        assert record is not None
        asyncio.run(_loaded_figures(state_dir, record.kubeconfig, row, options, say))
        row.rss_mb, row.cpu_s = control_plane_usage(state_dir)
        row.placement_p99_ms, decisions = placement_p99_ms(state_dir)
        say(f"  placement p99 over {decisions} decisions")
        row.nats = nats_traffic(state_dir)
        if row.nats is not None:
            say(
                f"  NATS: {row.nats.in_msgs} messages in ({row.nats.in_bytes} B) over "
                f"{row.nats.uptime_s:.0f} s, {row.nats.connections} connections; JetStream "
                f"holds {row.nats.stored_msgs} messages, {row.nats.stored_bytes} B"
            )
        row.relist_s = relist(state_dir, timeout_s=options.timeout_s)
        say(f"  relist: {', '.join(f'{k} {v:.1f} s' for k, v in row.relist_s.items())}")
    finally:
        simctl.down(state_dir, say=lambda _line: None)
        shutil.rmtree(state_dir, ignore_errors=True)
    return row


PROFILED = ("services.clique_allocator", "services.domain_controller", "sim.kubeapi")
PROFILING_PATH = Path(__file__).parent / "_profiling"


def profile_into(directory: Path) -> None:
    """Profile the allocator, the domain controller and the API emulator of the systems
    started from now on: ``<directory>/<module>-<pid>.pstats`` each (bench/_profiling/)."""
    directory.mkdir(parents=True, exist_ok=True)
    os.environ["CDO_PROFILE_DIR"] = str(directory)
    os.environ["CDO_PROFILE_MODULES"] = ",".join(PROFILED)
    path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROFILING_PATH), path) if p)


def run(
    sizes: Sequence[int], options: Options, *, say: Say, profile: Path | None = None
) -> list[SizeFigures]:
    for key, value in LEADER_ELECTION_ENV.items():
        os.environ.setdefault(key, value)
    rows = []
    for racks in sizes:
        if profile is not None:
            profile_into(profile / str(racks))
        rows.append(measure(racks, options, say=say))
        # Each size's row as soon as it is measured: a run stopped later still has it.
        say("  " + table(rows)[-1].strip())
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__)
    parser.add_argument("--racks", default="2,4", help="sizes, comma separated (2,4)")
    parser.add_argument("--full-racks", type=int, default=Options.full_racks)
    parser.add_argument("--pods-per-node", type=float, default=Options.pods_per_node)
    parser.add_argument("--seeds", type=int, default=Options.seeds, help="18x4 domains timed")
    parser.add_argument("--big-pods", type=int, default=Options.big_pods)
    parser.add_argument(
        "--window", type=float, default=Options.window_s, help="s at rest after the domains"
    )
    parser.add_argument("--timeout", type=float, default=Options.timeout_s, help="per domain, s")
    parser.add_argument("--load-timeout", type=float, default=Options.load_timeout_s)
    parser.add_argument(
        "--profile",
        type=Path,
        help="cProfile the allocator, the domain controller and the API emulator into "
        "DIR/<racks>/ (slower: not for the figures)",
    )
    args = parser.parse_args()
    options = Options(
        full_racks=args.full_racks,
        pods_per_node=args.pods_per_node,
        seeds=args.seeds,
        big_pods=args.big_pods,
        window_s=args.window,
        timeout_s=args.timeout,
        load_timeout_s=args.load_timeout,
    )
    sizes = [int(size) for size in args.racks.split(",")]
    say = lambda line: print(line, flush=True)  # noqa: E731
    rows = run(sizes, options, say=say, profile=args.profile)
    load1, load5, _ = os.getloadavg()
    print()
    print(
        f"{options.full_racks} full rack(s) per size; load {options.pods_per_node} pods/node; "
        f"req/min and ev/min: per node, IMEX agent + health monitor; ctl/alc: domain controller "
        f"/ clique allocator RSS MB and CPU s; big: pods x 4 GPUs; rel: relist s; "
        f"load average {load1:.1f} {load5:.1f}"
    )
    for line in table(rows):
        print(line)
    print("targets:")
    for line in targets(rows):
        print(line)
    print(result_line(figure for row in rows for figure in row.figures()))


if __name__ == "__main__":
    main()
