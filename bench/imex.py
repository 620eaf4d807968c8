"""Benchmark of the IMEX agent: claim preparation latency, and a new domain on a running clique.

One clique of ``--nodes`` simulated nodes (default 18, a full NVL72 rack), each with its IMEX
agent in this process (simulated NVML bound per node) driving a simulated ``nvidia-imex`` hosted
in process through the agent's ``Imex`` handle; the Kubernetes API emulator in its own process;
the kubelet's side of the DRA plugin protocol over the agents' unix sockets.

1. Bring-up: from starting the agents to every node READY with Domain UP (informative).
2. Prepare latency over ``--claims`` claims (default 1,000), spread over the nodes: each claim is
   created (labelled as if made from its domain's template), then allocated on a node and
   reserved for the pod seated there, the way the scheduler writes it; the clock starts when
   that write returns and stops when NodePrepareResources returns over gRPC. The claim is
   unprepared afterwards. A node's claims are all for its one seated pod, one after another.
3. A new domain on the running clique: from writing its Placement (one slice: the channel, 18
   members, a pod seated on each) and one allocated claim per node, until the domain is Ready as
   the domain controller decides it (``services/domain_controller/status.py``, its own
   ``compute_status``, over the Placement and the member Nodes read back from the API): every
   seated pod running on its member node, and no member degraded (in the slice's clique, no
   fault taint, ``cdo.dev/ImexReady=True``: its clique's IMEX daemon READY). There are no pods
   here, so a pod counts as Running once its NodePrepareResources returned the channel, as the
   kubelet starts a pod's containers only then; a prepare itself waits until the node's daemon
   serves the slice's clique and answers READY (``services/imex_agent/readiness.py``). The IMEX
   daemon is the clique's, not the domain's: on a running clique it is READY before the domain
   exists, so the time is the prepares' and the verdict's reads. Repeated ``--domains`` times.
   (Placement by the allocator and the domain controller's status write are not part of it.)
4. Churn, with a claim prepared on every node: a node leaves the clique (its clique label goes,
   as on a fabric fault) and rejoins; then another node gets a new address (its agent starts
   again with it, as a pod does after its host IP changed). Each is timed until every node is
   READY with Domain UP over the members again. The prepared claims must still be there.

``daemon_restarts`` counts, over bring-up and churn, every restart the agents counted
(``controller.restarts``) plus every extra daemon instance a node that the churn did not touch
started (the in-process daemons have no pid; their instance ids tell). With the static node map
it must be 0. The re-addressed node is the one exception, counted apart as
``readdressed_own_restarts``: its new agent adopts the running daemon, whose ``config.cfg`` binds
the old address, and restarts it once, as any change of its own ``config.cfg`` does (1 expected).

The bench writes what the allocator and the scheduler would: each Placement in the slice shape,
with the domain's pods seated at their ranks, and each claim with its pod in
``status.reservedFor``; an agent grants a claim's channel only to a pod its node's slice seats.
The pods themselves are never created: the agent reads the claim and the Placement, not the pod.

Target: a new domain ready in under 1 s on a running clique.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import logging
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec
import yaml

from bench._report import fixed, measure_table, percentile, result_line
from services.clique_allocator.records import spec_body
from services.domain_controller.facts import gather, member_nodes
from services.domain_controller.objects import (
    DomainNode,
    DomainPod,
    DomainPodSpec,
    DomainPodStatus,
)
from services.domain_controller.reconciler import now_in_seconds
from services.domain_controller.status import READY, compute_status
from services.imex_agent import AgentSettings, ImexAgent
from services.imex_agent.settings import DraSettings, ImexSettings
from shared.crds import (
    COMPUTE_DOMAINS,
    PLACEMENTS,
    Placement,
    PlacementSlice,
    PlacementSpec,
    install_crds,
)
from shared.crds.computedomain import ComputeDomainStatus
from shared.crds.names import (
    ALLOCATOR_USER,
    CLIQUE_LABEL,
    DOMAIN_LABEL,
    DOMAIN_UID_LABEL,
    DRIVER_NAME,
    WRITTEN_BY_ANNOTATION,
)
from shared.crds.placement import PlacedPod, SliceMember
from shared.kube.client import KubeClient
from shared.kube.informer import InformerSettings
from shared.kube.meta import KubeObject, ObjectMeta
from shared.kube.resources import NAMESPACES, NODES, RESOURCE_CLAIMS
from shared.kubeletapi import Claim, DraPluginClient, PluginWatcher
from shared.metrics import Metrics
from shared.nvml import PynvmlNvml
from sim.imex import Timing
from sim.natsserver import free_port
from sim.nodehost.imex import NodeImex
from sim.nvml import SimulatedNvml, bound_context
from sim.topology import Node as SimNode
from sim.topology import parse_topology

NAMESPACE = "bench"
TIMING = Timing(heartbeat_interval=1.0, heartbeat_timeout=3.0)
GPUS_PER_POD = 4


@dataclass(frozen=True)
class SeatedPod:
    """A pod of a bench domain as the Placement seats it and a claim's ``reservedFor`` names it."""

    name: str
    uid: str
    node: SimNode
    rank: int


def seat_one_per_node(domain: str, nodes: Sequence[SimNode]) -> list[SeatedPod]:
    """A pod of ``GPUS_PER_POD`` GPUs on each node, ranked in slot order: ``<domain>-<rank>``."""
    ordered = sorted(nodes, key=lambda node: node.tray_index)
    return [
        SeatedPod(name=f"{domain}-{rank}", uid=str(uuid.uuid4()), node=node, rank=rank)
        for rank, node in enumerate(ordered)
    ]


# -- the cluster ----------------------------------------------------------------------------------


async def start_emulator(tmp: Path) -> tuple[asyncio.subprocess.Process, Path]:
    kubeconfig = tmp / "kubeconfig"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sim.kubeapi",
        "--port",
        "0",
        "--kubeconfig",
        str(kubeconfig),
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    await asyncio.wait_for(proc.stdout.readline(), 60)
    yaml.safe_load(kubeconfig.read_text())
    return proc, kubeconfig


class Bench:
    def __init__(self, client: KubeClient, root: Path, nodes: int) -> None:
        self.client = client
        self.root = root
        text = (
            "name: imex-bench\n"
            f"nodes_per_rack: {nodes}\naddress_base: 127.77.0.0\nracks:\n  - name: rack-0\n"
        )
        self.topology = parse_topology(text)
        self.clique = self.topology.nodes[0].clique
        self.peer_port = free_port()
        self.cmd_port = free_port()
        proc_devices = root / "proc-devices"
        proc_devices.write_text("Character devices:\n234 nvidia-caps-imex-channels\n")
        self.proc_devices = proc_devices
        self.agents: dict[str, ImexAgent] = {}
        self.retired: list[ImexAgent] = []
        self.imex: dict[str, NodeImex] = {}
        self.addresses = {node.name: node.address for node in self.topology.nodes}
        self.plugins: dict[str, DraPluginClient] = {}
        self.watchers: list[PluginWatcher] = []
        self.tasks: dict[str, asyncio.Task[None]] = {}

    def settings(self, index: int) -> AgentSettings:
        node = self.topology.nodes[index]
        home = self.root / f"n{index}"
        return AgentSettings(
            node_name=node.name,
            address=self.addresses[node.name],
            imex=ImexSettings(
                config_dir=str(home / "imex"),
                hosts_file=str(home / "hosts"),
                server_port=self.peer_port,
                cmd_port=self.cmd_port,
                reload_min_interval_s=1.0,
                poll_interval_s=5.0,
            ),
            dra=DraSettings(
                kubelet_root=str(home / "kubelet"),
                cdi_root=str(home / "cdi"),
                device_root=str(home / "dev"),
                device_mode="placeholder",
                proc_devices=str(self.proc_devices),
                attachments=8,
            ),
            informer=InformerSettings(backoff_initial_s=0.05, backoff_max_s=1.0),
        )

    async def register_nodes(self) -> None:
        for node in self.topology.nodes:
            await self.client.create(
                NODES,
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": node.name, "labels": {CLIQUE_LABEL: node.clique}},
                },
            )
        await self.client.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )

    def start_agent(self, index: int) -> None:
        node = self.topology.nodes[index]
        settings = self.settings(index)
        imex = self.imex.setdefault(
            node.name, NodeImex(hosts_file=Path(settings.imex.hosts_file), timing=TIMING)
        )
        agent = ImexAgent(
            settings=settings,
            nvml=PynvmlNvml(),
            imex=imex,
            client=self.client,
            bus=None,
            metrics=Metrics(),
        )
        self.agents[node.name] = agent
        self.tasks[node.name] = asyncio.create_task(
            agent.run(), context=bound_context(SimulatedNvml(node))
        )

    async def stop_agent(self, name: str) -> None:
        task = self.tasks.pop(name)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        self.retired.append(self.agents.pop(name))

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        watchers: list[asyncio.Task[None]] = []
        try:
            for index in range(len(self.topology.nodes)):
                self.start_agent(index)
                watcher = PluginWatcher(
                    registry_dir=Path(self.settings(index).dra.kubelet_root) / "plugins_registry",
                    scan_interval=0.05,
                )
                self.watchers.append(watcher)
                watchers.append(asyncio.create_task(watcher.run()))
            yield
        finally:
            tasks = [*self.tasks.values(), *watchers]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def restarts(self, *, untouched: Sequence[str]) -> int:
        """Restarts the agents of ``untouched`` nodes and every retired agent counted, plus
        extra daemon instances on ``untouched`` nodes."""
        agents = [self.agents[name] for name in untouched]
        counted = sum(a.controller.restarts for a in (*agents, *self.retired))
        extra = sum(len(self.imex[name].started) - 1 for name in untouched)
        return counted + extra

    def own_restarts(self, name: str) -> int:
        """Restarts the current agent of ``name`` counted."""
        return self.agents[name].controller.restarts

    def up(self, members: set[str]) -> bool:
        """Every agent of ``members`` READY, Domain UP, seeing exactly the other members."""
        for name in members:
            event = self.agents[name].reporter.event
            if event is None or (event.daemon_state, event.domain_state) != ("READY", "UP"):
                return False
            peers = {peer.node: peer.state for peer in event.peers}
            if peers != {other: "CONNECTED" for other in members if other != name}:
                return False
        return all(self.agents[name].plugin.registered for name in members)

    async def wait_up(self, limit_s: float, members: set[str] | None = None) -> float:
        started = time.perf_counter()
        deadline = started + limit_s
        wanted = members if members is not None else set(self.agents)
        while not self.up(wanted):
            if time.perf_counter() > deadline:
                raise TimeoutError(f"the clique did not come UP with {len(wanted)} members")
            await asyncio.sleep(0.05)
        for watcher, node in zip(self.watchers, self.topology.nodes, strict=True):
            self.plugins[node.name] = watcher.client(DRIVER_NAME)
        return time.perf_counter() - started

    async def create_domain(self, name: str, channel: int) -> tuple[str, str]:
        body = {
            "apiVersion": COMPUTE_DOMAINS.api_version,
            "kind": COMPUTE_DOMAINS.kind,
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"channel": {"resourceClaimTemplate": {"name": f"{name}-channel"}}},
        }
        raw = await self.client.create(COMPUTE_DOMAINS, body, namespace=NAMESPACE)
        return name, msgspec.json.decode(raw, type=KubeObject).metadata.uid

    def placement_spec(self, channel: int, pods: Sequence[SeatedPod]) -> PlacementSpec:
        """One slice in the clique on ``channel``, seating ``pods`` on their nodes (one each)."""
        members = tuple(
            SliceMember(
                node=pod.node.name,
                slot=pod.node.tray_index,
                gpus=GPUS_PER_POD,
                pods=(PlacedPod(name=pod.name, rank=pod.rank, uid=pod.uid),),
            )
            for pod in sorted(pods, key=lambda pod: pod.node.tray_index)
        )
        piece = PlacementSlice(
            index=0, clique=self.clique, channel=channel, size=len(pods), members=members
        )
        return PlacementSpec(gpus_per_pod=GPUS_PER_POD, size=len(pods), slices=(piece,))

    async def place(self, name: str, uid: str, channel: int, pods: Sequence[SeatedPod]) -> None:
        await self.client.create(
            PLACEMENTS,
            {
                "apiVersion": PLACEMENTS.api_version,
                "kind": PLACEMENTS.kind,
                "metadata": {
                    "name": name,
                    "namespace": NAMESPACE,
                    # Signed as the allocator signs its writes: the agent grants nothing else.
                    "annotations": {WRITTEN_BY_ANNOTATION: ALLOCATOR_USER},
                    "ownerReferences": [
                        {
                            "apiVersion": COMPUTE_DOMAINS.api_version,
                            "kind": COMPUTE_DOMAINS.kind,
                            "name": name,
                            "uid": uid,
                            "controller": True,
                        }
                    ],
                },
                # As the allocator writes it: the slice shape only.
                "spec": spec_body(self.placement_spec(channel, pods)),
            },
            namespace=NAMESPACE,
        )

    async def new_claim(self, name: str, domain: tuple[str, str]) -> Claim:
        body = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {
                "name": name,
                "namespace": NAMESPACE,
                "labels": {DOMAIN_LABEL: domain[0], DOMAIN_UID_LABEL: domain[1]},
            },
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "channel",
                            "exactly": {"deviceClassName": "compute-domain-channel.cdo.dev"},
                        }
                    ]
                }
            },
        }
        raw = await self.client.create(RESOURCE_CLAIMS, body, namespace=NAMESPACE)
        uid = msgspec.json.decode(raw, type=KubeObject).metadata.uid
        return Claim(namespace=NAMESPACE, uid=uid, name=name)

    async def allocate(self, claim: Claim, pod: SeatedPod, device: str) -> None:
        """Allocate ``device`` of the pod's node to the claim and reserve it for the pod."""
        node = pod.node.name
        allocation = {
            "devices": {
                "results": [
                    {"request": "channel", "driver": DRIVER_NAME, "pool": node, "device": device}
                ]
            }
        }
        reserved_for = [{"resource": "pods", "name": pod.name, "uid": pod.uid}]
        await self.client.patch(
            RESOURCE_CLAIMS,
            claim.name,
            {"status": {"allocation": allocation, "reservedFor": reserved_for}},
            namespace=NAMESPACE,
            subresource="status",
        )

    async def domain_ready(self, name: str, pods: Sequence[SeatedPod], running: set[str]) -> str:
        """ "" when the domain controller's own decision calls domain ``name`` Ready now, over
        its Placement and member Nodes as the API has them and ``running`` (the pods whose
        prepare returned); else the reason it is not."""
        raw = await self.client.get(PLACEMENTS, name, namespace=NAMESPACE)
        placement = msgspec.json.decode(raw, type=Placement).spec
        # Read at once: the controller reads its caches; the bench's reads should cost no more.
        names = member_nodes(placement, ())
        raws = await asyncio.gather(*(self.client.get(NODES, node) for node in names))
        nodes = {
            node: msgspec.json.decode(raw, type=DomainNode)
            for node, raw in zip(names, raws, strict=True)
        }
        facts = gather(
            generation=1,
            deleting=False,
            template_conflict="",
            placement=placement,
            pods=[kubelet_pod(pod, running=pod.name in running) for pod in pods],
            nodes=nodes,
            gang_size=0,  # the bench's domains set no spec.gang
        )
        status = compute_status(facts, previous=ComputeDomainStatus(), now=now_in_seconds()).status
        ready = status.condition(READY)
        if ready is not None and ready.status == "True":
            return ""
        return f"{ready.reason}: {ready.message}" if ready is not None else "no Ready condition"


def kubelet_pod(pod: SeatedPod, *, running: bool) -> DomainPod:
    """The seated pod as the kubelet would report it: Running on its node once its claim is
    prepared (a pod's containers start only after NodePrepareResources), Pending before."""
    return DomainPod(
        metadata=ObjectMeta(name=pod.name, namespace=NAMESPACE, uid=pod.uid),
        spec=DomainPodSpec(node_name=pod.node.name),
        status=DomainPodStatus(phase="Running" if running else "Pending"),
    )


async def measure_prepare(bench: Bench, claims: int) -> list[float]:
    domain = await bench.create_domain("latency", 1)
    pods = seat_one_per_node("latency", bench.topology.nodes)
    await bench.place(*domain, channel=1, pods=pods)
    latencies: list[float] = []
    for index in range(claims):
        pod = pods[index % len(pods)]
        plugin = bench.plugins[pod.node.name]
        claim = await bench.new_claim(f"claim-{index}", domain)
        await bench.allocate(claim, pod, f"attach-{index % 8}")
        started = time.perf_counter()
        result = (await plugin.prepare([claim]))[claim.uid]
        latencies.append(time.perf_counter() - started)
        if not result.ok:
            raise RuntimeError(f"prepare failed: {result.error}")
        unprepared = (await plugin.unprepare([claim]))[claim.uid]
        if not unprepared.ok:
            raise RuntimeError(f"unprepare failed: {unprepared.error}")
    return latencies


async def measure_new_domain(bench: Bench, index: int, limit_s: float = 60) -> tuple[float, float]:
    """Seconds to Ready (the domain controller's verdict), and of it the seconds until every
    prepare returned."""
    channel = 100 + index
    name = f"job-{index}"
    domain = await bench.create_domain(name, channel)
    nodes = bench.topology.nodes
    pods = seat_one_per_node(name, nodes)
    claims = [await bench.new_claim(f"{pod.name}-channel", domain) for pod in pods]
    running: set[str] = set()
    started = time.perf_counter()
    await bench.place(*domain, channel=channel, pods=pods)

    async def one(pod: SeatedPod, claim: Claim) -> None:
        await bench.allocate(claim, pod, "attach-7")
        result = (await bench.plugins[pod.node.name].prepare([claim]))[claim.uid]
        if not result.ok:
            raise RuntimeError(f"prepare on {pod.node.name} failed: {result.error}")
        running.add(pod.name)

    await asyncio.gather(*(one(pod, claim) for pod, claim in zip(pods, claims, strict=True)))
    prepared = time.perf_counter() - started
    while why := await bench.domain_ready(name, pods, running):
        if time.perf_counter() - started > limit_s:
            raise TimeoutError(f"domain {name} not Ready after {limit_s:.0f} s: {why}")
        await asyncio.sleep(0.01)
    ready = time.perf_counter() - started
    for node in nodes:
        channel_file = Path(bench.settings(node.tray_index).dra.device_root) / f"channel{channel}"
        assert channel_file.exists()
    for pod, claim in zip(pods, claims, strict=True):
        await bench.plugins[pod.node.name].unprepare([claim])
    return ready, prepared


class Churn(msgspec.Struct, frozen=True, kw_only=True):
    leave_rejoin_s: float
    readdress_s: float
    moved: str
    """The node whose agent started again with a new address."""


async def prepare_on_every_node(bench: Bench, channel: int) -> list[tuple[SeatedPod, Claim]]:
    domain = await bench.create_domain("churn", channel)
    pods = seat_one_per_node("churn", bench.topology.nodes)
    await bench.place(*domain, channel=channel, pods=pods)
    prepared = []
    for pod in pods:
        claim = await bench.new_claim(f"{pod.name}-channel", domain)
        await bench.allocate(claim, pod, "attach-6")
        result = (await bench.plugins[pod.node.name].prepare([claim]))[claim.uid]
        if not result.ok:
            raise RuntimeError(f"prepare on {pod.node.name} failed: {result.error}")
        prepared.append((pod, claim))
    return prepared


async def measure_churn(bench: Bench) -> Churn:
    """A node leaves the clique and rejoins; another gets a new address (see the docstring)."""
    channel = 50
    prepared = await prepare_on_every_node(bench, channel)
    nodes = bench.topology.nodes
    everyone = set(bench.agents)
    leaving, moving = nodes[len(nodes) // 2], nodes[1]

    started = time.perf_counter()
    await bench.client.patch(NODES, leaving.name, {"metadata": {"labels": {CLIQUE_LABEL: None}}})
    await bench.wait_up(60, everyone - {leaving.name})
    await bench.client.patch(
        NODES, leaving.name, {"metadata": {"labels": {CLIQUE_LABEL: leaving.clique}}}
    )
    await bench.wait_up(60)
    leave_rejoin = time.perf_counter() - started

    started = time.perf_counter()
    await bench.stop_agent(moving.name)
    # Rack 0's addresses are 127.77.0.x: 127.77.1.x is free.
    bench.addresses[moving.name] = str(ipaddress.IPv4Address(moving.address) + 256)
    bench.start_agent(nodes.index(moving))
    await bench.wait_up(60)
    readdress = time.perf_counter() - started

    for pod, claim in prepared:
        device_root = Path(bench.settings(pod.node.tray_index).dra.device_root)
        if not (device_root / f"channel{channel}").exists():
            raise RuntimeError(f"channel{channel} is gone from {pod.node.name}")
        again = (await bench.plugins[pod.node.name].prepare([claim]))[claim.uid]
        if not again.ok:
            raise RuntimeError(f"the claim on {pod.node.name} is gone: {again.error}")
    return Churn(leave_rejoin_s=leave_rejoin, readdress_s=readdress, moved=moving.name)


async def main(args: argparse.Namespace) -> None:
    # The simulated daemons log peer refusals while the clique forms; the table is the output.
    logging.getLogger("sim.imex").setLevel(logging.ERROR)
    # The churn takes a node out of its clique on purpose; its agent says so as a warning.
    logging.getLogger("cdo.imex_agent.daemon").setLevel(logging.ERROR)
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="imex-bench-", dir="/tmp") as tmp:
        proc, kubeconfig = await start_emulator(Path(tmp))
        client = await KubeClient.connect(kubeconfig=kubeconfig)
        try:
            await install_crds(client)
            bench = Bench(client, Path(tmp), args.nodes)
            await bench.register_nodes()
            async with bench.running():
                bring_up = await bench.wait_up(120)
                rows.append((f"clique of {args.nodes} nodes READY, Domain UP", f"{bring_up:.2f} s"))
                latencies = await measure_prepare(bench, args.claims)
                p50 = 1000 * statistics.median(latencies)
                p99 = 1000 * percentile(latencies, 0.99)
                rows.append(
                    (
                        f"allocation -> NodePrepareResources returned ({args.claims} claims)",
                        f"p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {1000 * max(latencies):.1f} ms",
                    )
                )
                readies: list[float] = []
                prepares: list[float] = []
                for index in range(args.domains):
                    ready, prepared = await measure_new_domain(bench, index)
                    readies.append(ready)
                    prepares.append(prepared)
                rows.append(
                    (
                        f"new domain on the running clique, {args.nodes} nodes prepared",
                        f"median {1000 * statistics.median(prepares):.0f} ms "
                        f"(max {1000 * max(prepares):.0f} ms)",
                    )
                )
                rows.append(
                    (
                        "  ... and Ready (the domain controller's decision)",
                        f"median {1000 * statistics.median(readies):.0f} ms "
                        f"(max {1000 * max(readies):.0f} ms) over {args.domains} domains",
                    )
                )
                churn = await measure_churn(bench)
                rows.append(
                    ("churn: a node leaves the clique and rejoins", f"{churn.leave_rejoin_s:.2f} s")
                )
                rows.append(("churn: a node gets a new address", f"{churn.readdress_s:.2f} s"))
                untouched = [name for name in bench.agents if name != churn.moved]
                restarts = bench.restarts(untouched=untouched)
                rows.append(("IMEX daemon restarts, bring-up and churn", str(restarts)))
                own = bench.own_restarts(churn.moved)
                rows.append(("  ... the re-addressed node's own (config.cfg changed)", str(own)))
        finally:
            await client.close()
            proc.terminate()
            await proc.wait()
    print("\n".join(measure_table(rows)))
    print(
        result_line(
            [
                ("nodes", args.nodes),
                ("claims", args.claims),
                ("clique_up_s", fixed(bring_up, 2)),
                ("prepare_p50_ms", fixed(p50, 1)),
                ("prepare_p99_ms", fixed(p99, 1)),
                ("new_domain_ready_ms", fixed(1000 * statistics.median(readies), 0)),
                ("new_domain_ready_max_ms", fixed(1000 * max(readies), 0)),
                ("new_domain_under_1s", int(statistics.median(readies) < 1.0)),
                ("daemon_restarts", restarts),
                ("churn_leave_rejoin_s", fixed(churn.leave_rejoin_s, 2)),
                ("churn_readdress_s", fixed(churn.readdress_s, 2)),
                ("readdressed_own_restarts", own),
            ]
        )
    )


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=18, help="nodes in the clique (<= 18)")
    parser.add_argument("--claims", type=int, default=1000, help="claims for the latency run")
    parser.add_argument("--domains", type=int, default=5, help="new domains to time")
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse()))
