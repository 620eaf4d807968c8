"""Simulated nodes with IMEX agents, for the agent's integration tests.

Each test gets a topology on its own random 127.x.0.0 block and its own free IMEX ports. A node
has a short root directory (unix socket paths are limited to 107 bytes) holding its agent's
IMEX config directory, hosts file, kubelet root, CDI root and channel device root; its agent
runs in this process with the node's simulated NVML bound to its tasks, and drives simulated
``nvidia-imex`` daemons as real subprocesses. The tests play the other writers: the health
monitor's clique label, the allocator's Placement, the scheduler's claim allocation, and the
kubelet's plugin calls (through shared.kubeletapi's PluginWatcher). A claim is made for a pod
that the test seats in the domain's Placement first (:func:`seat_pod`), as the allocator does
before it pins the pod.

A node's ``ctl_in_process`` keeps its daemon a real process but asks it what
``nvidia-imex-ctl`` would print from this process (:class:`ProcessDaemonImex`): a Python start
per poll of 18 agents would not fit a small machine. Every daemon an agent starts is recorded
(``SimNode.started_pids``), so tests count restarts by pid as well as by the agents' counters.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

import msgspec

from services.imex_agent import AgentSettings, CommandImex, ImexAgent, ImexProcess
from services.imex_agent.preflight import DaemonRecord
from services.imex_agent.report import UNAVAILABLE, DomainReport, parse_domain_report
from services.imex_agent.settings import ENV_PREFIX, DraSettings, ImexSettings
from shared.bus import EventBus
from shared.crds import COMPUTE_DOMAINS, PLACEMENTS, install_crds
from shared.crds.names import (
    ALLOCATOR_USER,
    CLIQUE_LABEL,
    DOMAIN_LABEL,
    DOMAIN_UID_LABEL,
    DRIVER_NAME,
    WRITTEN_BY_ANNOTATION,
)
from shared.crds.placement import LegacyMember, PlacedPod, Placement, PlacementSpec, SliceMember
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.informer import InformerSettings
from shared.kube.meta import KubeObject
from shared.kube.models import Node as NodeObject
from shared.kube.resources import NAMESPACES, NODES, RESOURCE_CLAIMS
from shared.kubeletapi import Claim, DraPluginClient, PluginWatcher
from shared.metrics import Metrics
from shared.nvml import Nvml, PynvmlNvml
from shared.settings import Settings, settings_environ
from sim.imex import (
    CommandError,
    ImexConfigError,
    Resolver,
    load_config,
    local_endpoint,
    query_domain,
    query_status,
    render_json,
)
from sim.nvml import SimulatedNvml, bound_context
from sim.topology import Cluster, Node, parse_topology
from tests.integration.imex.cluster import free_port
from tests.support.wait import wait_for

MAJOR = 234
FAST_INFORMERS = InformerSettings(backoff_initial_s=0.05, backoff_max_s=0.5)


def random_topology_text(*, racks: int = 1, nodes: int = 3) -> str:
    """A topology on a random 127.x block, so concurrent runs do not meet on one address."""
    base = f"127.{random.randint(64, 250)}.{random.randrange(0, 200, 8)}.0"
    rack_lines = "".join(f"  - name: rack-{index}\n" for index in range(racks))
    return (
        f"name: imex-agent-test\nnodes_per_rack: {nodes}\naddress_base: {base}\n"
        f"racks:\n{rack_lines}"
    )


def random_topology(*, racks: int = 1, nodes: int = 3) -> Cluster:
    return parse_topology(random_topology_text(racks=racks, nodes=nodes))


def settings_env(value: Settings, *, prefix: str = ENV_PREFIX) -> dict[str, str]:
    """The CDO_IMEX_AGENT_* variables that make a process read ``value``."""
    return settings_environ(value, prefix=prefix)


def fast_imex(**overrides: Any) -> dict[str, Any]:
    """IMEX settings that keep a test short (the command lines are set per node)."""
    values: dict[str, Any] = {
        "restart_backoff_initial_s": 0.3,
        "restart_backoff_max_s": 2.0,
        "stop_timeout_s": 5.0,
        "reload_min_interval_s": 0.5,
        "poll_interval_s": 2.0,
        "fast_poll_interval_s": 0.3,
        "fast_poll_window_s": 3.0,
        "clique_refresh_s": 0.5,
        # A test stops a node by stopping its agent: its daemon goes too. The tests of an agent
        # that leaves its daemon to the next one (test_adopt.py) turn this off.
        "stop_on_exit": True,
    }
    values.update(overrides)
    return values


class ProcessDaemonImex(CommandImex):
    """The daemon as a child process, as in production; the ctl's questions asked in process.

    ``query_state`` and ``query_domain`` give what ``python -m sim.imex.ctl -q`` / ``-N -j``
    print, through the same client functions, without starting a Python process per poll.
    """

    def __init__(self, *, daemon_argv: Sequence[str], hosts_file: Path) -> None:
        # The ctl named is the simulator's, run by the daemon's interpreter; its questions are
        # answered in process (below), so only its presence is ever looked at.
        super().__init__(daemon_argv=daemon_argv, ctl_argv=(daemon_argv[0], "-m", "sim.imex.ctl"))
        self._resolver = Resolver(hosts_file, system=False)

    async def query_state(self, config: Path) -> str:
        try:
            status = await query_status(local_endpoint(load_config(config)))
        except (CommandError, ImexConfigError):
            return UNAVAILABLE
        return status.state.value

    async def query_domain(self, config: Path) -> DomainReport:
        view = await query_domain(load_config(config), resolver=self._resolver)
        return parse_domain_report(render_json(view))


class RecordingStarts:
    """An ``Imex`` handle that records the pid of every daemon it starts."""

    def __init__(self, inner: CommandImex, pids: list[int]) -> None:
        self._inner = inner
        self._pids = pids

    async def start(self, config: Path, *, output: Path) -> ImexProcess:
        process = await self._inner.start(config, output=output)
        if process.pid is not None:
            self._pids.append(process.pid)
        return process

    def adopt(self, record: DaemonRecord, *, config: Path) -> ImexProcess:
        return self._inner.adopt(record, config=config)

    async def query_state(self, config: Path) -> str:
        return await self._inner.query_state(config)

    async def query_domain(self, config: Path) -> DomainReport:
        return await self._inner.query_domain(config)

    def missing_programs(self) -> tuple[str, ...]:
        return self._inner.missing_programs()


class SimNode:
    """One simulated node: its topology entry, NVML, files, and (while started) its agent."""

    def __init__(self, cluster: ImexCluster, node: Node, root: Path) -> None:
        self.cluster = cluster
        self.topology = node
        self.name = node.name
        self.address = node.address
        self.root = root
        self.nvml = SimulatedNvml(node)
        self.agent: ImexAgent | None = None
        self.nvml_handle: Nvml | None = None
        self.bus: EventBus | None = None
        self.metrics = Metrics()
        self.imex_overrides: dict[str, Any] = {}
        self.dra_overrides: dict[str, Any] = {}
        self.daemon_extra: str = f"--sigusr1-interval {0.5}"
        self.ctl_in_process = False
        self.started_pids: list[int] = []
        """The pid of every daemon this node's agents started, in order."""

    @property
    def hosts_file(self) -> Path:
        return self.root / "hosts"

    @property
    def imex_dir(self) -> Path:
        return self.root / "imex"

    @property
    def kubelet_root(self) -> Path:
        return self.root / "kubelet"

    @property
    def cdi_root(self) -> Path:
        return self.root / "cdi"

    @property
    def device_root(self) -> Path:
        return self.root / "dev"

    def settings(self) -> AgentSettings:
        python = sys.executable
        imex = ImexSettings(
            daemon_command=(
                f"{python} -m sim.imex.daemon --hosts-file {self.hosts_file} {self.daemon_extra}"
            ),
            ctl_command=f"{python} -m sim.imex.ctl --hosts-file {self.hosts_file}",
            config_dir=str(self.imex_dir),
            hosts_file=str(self.hosts_file),
            server_port=self.cluster.peer_port,
            cmd_port=self.cluster.cmd_port,
            **{**fast_imex(), **self.imex_overrides},
        )
        dra = DraSettings(
            kubelet_root=str(self.kubelet_root),
            cdi_root=str(self.cdi_root),
            device_root=str(self.device_root),
            device_mode="placeholder",
            proc_devices=str(self.cluster.proc_devices),
            attachments=4,
            **self.dra_overrides,
        )
        return AgentSettings(
            node_name=self.name,
            address=self.address,
            imex=imex,
            dra=dra,
            informer=FAST_INFORMERS,
        )

    def nodes_config(self) -> str:
        path = self.imex_dir / "nodes_config.cfg"
        return path.read_text() if path.exists() else ""


class ImexCluster:
    """The nodes of one test and the API/bus around them."""

    def __init__(
        self,
        *,
        client: KubeClient,
        bus_factory: Callable[..., Any],
        topology: Cluster,
        root_factory: Callable[[], Path],
        work: Path,
    ) -> None:
        self.client = client
        self.bus_factory = bus_factory
        self.topology = topology
        self.peer_port = free_port()
        self.cmd_port = free_port()
        self.proc_devices = work / "proc-devices"
        self.proc_devices.write_text(
            f"Character devices:\n  1 mem\n{MAJOR} nvidia-caps-imex-channels\n\n"
            "Block devices:\n  8 sd\n"
        )
        self.nodes = {node.name: SimNode(self, node, root_factory()) for node in topology.nodes}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._watchers: dict[str, tuple[PluginWatcher, asyncio.Task[None]]] = {}

    def __getitem__(self, name: str) -> SimNode:
        return self.nodes[name]

    def node_list(self) -> list[SimNode]:
        return list(self.nodes.values())

    # -- the API side ---------------------------------------------------------------------------

    async def register(
        self, node: SimNode, *, labelled: bool = True, clique: str | None = None
    ) -> None:
        """Create the Node object, labelled with its clique as the health monitor would."""
        labels = {"kubernetes.io/hostname": node.name}
        if labelled:
            labels[CLIQUE_LABEL] = clique or node.topology.clique
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": node.name, "labels": labels},
            "status": {"addresses": [{"type": "InternalIP", "address": node.address}]},
        }
        await self.client.create(NODES, body)

    async def label(self, node: SimNode, clique: str | None) -> None:
        await self.client.patch(NODES, node.name, {"metadata": {"labels": {CLIQUE_LABEL: clique}}})

    async def node_object(self, name: str) -> NodeObject:
        return msgspec.json.decode(await self.client.get(NODES, name), type=NodeObject)

    async def condition(self, name: str) -> tuple[str, str] | None:
        condition = (await self.node_object(name)).condition("cdo.dev/ImexReady")
        return None if condition is None else (condition.status, condition.reason)

    # -- agents ---------------------------------------------------------------------------------

    async def start(
        self, node: SimNode, *, with_bus: bool = True, client: KubeClient | None = None
    ) -> ImexAgent:
        """Start ``node``'s agent, with ``client`` (default: the cluster's) as its identity."""
        node.bus = await self.bus_factory(f"agent-{node.name}") if with_bus else None
        node.metrics = Metrics()  # a new agent process, a new registry
        imex_settings = node.settings().imex
        programs = (
            ProcessDaemonImex(daemon_argv=imex_settings.daemon_argv, hosts_file=node.hosts_file)
            if node.ctl_in_process
            else CommandImex(daemon_argv=imex_settings.daemon_argv, ctl_argv=imex_settings.ctl_argv)
        )
        agent = ImexAgent(
            settings=node.settings(),
            nvml=node.nvml_handle or PynvmlNvml(),
            imex=RecordingStarts(programs, node.started_pids),
            client=client or self.client,
            bus=node.bus,
            metrics=node.metrics,
        )
        node.agent = agent
        self._tasks[node.name] = asyncio.create_task(
            agent.run(), name=f"agent {node.name}", context=bound_context(node.nvml)
        )
        return agent

    async def stop(self, node: SimNode) -> None:
        task = self._tasks.pop(node.name, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def task(self, node: SimNode) -> asyncio.Task[None]:
        return self._tasks[node.name]

    def check_agents(self) -> None:
        """Fail at once when an agent task died."""
        for name, task in self._tasks.items():
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise AssertionError(f"agent {name} failed") from task.exception()

    async def close(self) -> None:
        for name in list(self._tasks):
            await self.stop(self.nodes[name])
        for watcher, task in self._watchers.values():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await watcher.close()

    # -- the kubelet side -----------------------------------------------------------------------

    async def kubelet(self, node: SimNode) -> PluginWatcher:
        """A plugin watcher on the node's plugins_registry, as the node's kubelet has."""
        if node.name not in self._watchers:
            watcher = PluginWatcher(
                registry_dir=node.kubelet_root / "plugins_registry", scan_interval=0.05
            )
            task = asyncio.create_task(watcher.run(), name=f"kubelet {node.name}")
            self._watchers[node.name] = (watcher, task)
        return self._watchers[node.name][0]

    async def plugin(self, node: SimNode) -> DraPluginClient:
        watcher = await self.kubelet(node)

        def registered() -> DraPluginClient | None:
            self.check_agents()
            return watcher.client(DRIVER_NAME) if DRIVER_NAME in watcher.plugins else None

        return await wait_for(registered, timeout=15, what=f"plugin of {node.name} registered")


# -- the allocator's and the scheduler's writes --------------------------------------------------


class Domain(msgspec.Struct, frozen=True, kw_only=True):
    namespace: str
    name: str
    uid: str
    channel: int
    clique: str
    legacy: bool = False
    """Its Placement has the previous release's one-clique shape (pods as plain names)."""


async def ensure_namespace(client: KubeClient, name: str) -> None:
    try:
        await client.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )
    except KubeApiError as exc:
        if not exc.already_exists:
            raise


async def install(client: KubeClient) -> None:
    await install_crds(client)


def one_slice(*, clique: str, channel: int, index: int = 0, first_rank: int = 0) -> dict[str, Any]:
    """An empty slice of a Placement (pods are seated with :func:`seat_pod`)."""
    return {
        "index": index,
        "clique": clique,
        "channel": channel,
        "firstRank": first_rank,
        "size": 0,
        "members": [],
    }


async def create_domain(
    client: KubeClient,
    *,
    namespace: str,
    name: str,
    channel: int,
    clique: str,
    legacy: bool = False,
    slices: list[dict[str, Any]] | None = None,
) -> Domain:
    """A ComputeDomain and the Placement the allocator would write for it, before any pod.

    The Placement has one slice in ``clique`` on ``channel`` (``slices``, when given, are
    written as they are); with ``legacy`` it has the previous release's shape instead.
    """
    await ensure_namespace(client, namespace)
    body = {
        "apiVersion": COMPUTE_DOMAINS.api_version,
        "kind": COMPUTE_DOMAINS.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"channel": {"resourceClaimTemplate": {"name": f"{name}-channel"}}},
    }
    domain = msgspec.json.decode(
        await client.create(COMPUTE_DOMAINS, body, namespace=namespace), type=KubeObject
    )
    uid = domain.metadata.uid
    spec: dict[str, Any]
    if legacy:
        spec = {"clique": clique, "channel": channel, "gpusPerPod": 1, "size": 0, "members": []}
    else:
        pieces = slices if slices is not None else [one_slice(clique=clique, channel=channel)]
        size = sum(int(piece["size"]) for piece in pieces)
        spec = {"gpusPerPod": 1, "size": size, "slices": pieces}
    placement = {
        "apiVersion": PLACEMENTS.api_version,
        "kind": PLACEMENTS.kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            # As the allocator writes it: the agent grants channels only from its records.
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
        "spec": spec,
    }
    await client.create(PLACEMENTS, placement, namespace=namespace)
    return Domain(
        namespace=namespace, name=name, uid=uid, channel=channel, clique=clique, legacy=legacy
    )


class _Member(Protocol):
    @property
    def node(self) -> str: ...
    @property
    def slot(self) -> int: ...


MemberT = TypeVar("MemberT", bound=_Member)


def _with_member(
    members: Sequence[MemberT], node: str, add: Callable[[MemberT | None, int], MemberT]
) -> list[MemberT]:
    """``members`` with the one of ``node`` replaced by ``add(it, slot)`` (appended if new)."""
    for position, existing in enumerate(members):
        if existing.node == node:
            return [*members[:position], add(existing, existing.slot), *members[position + 1 :]]
    return [*members, add(None, len(members))]


def _seated_in_slice(
    spec: PlacementSpec, *, clique: str, pod: str, uid: str, node: str
) -> dict[str, Any]:
    """The spec patch that adds ``pod`` to the slice in ``clique``, with the slice's next rank."""
    position = next(i for i, piece in enumerate(spec.slices) if piece.clique == clique)
    piece = spec.slices[position]
    placed = PlacedPod(name=pod, rank=piece.first_rank + piece.placed_pods, uid=uid)

    def add(member: SliceMember | None, slot: int) -> SliceMember:
        if member is None:
            return SliceMember(node=node, slot=slot, gpus=1, pods=(placed,))
        return msgspec.structs.replace(member, gpus=member.gpus + 1, pods=(*member.pods, placed))

    grown = msgspec.structs.replace(
        piece,
        size=max(piece.size, piece.placed_pods + 1),
        members=tuple(_with_member(piece.members, node, add)),
    )
    slices = [*spec.slices[:position], grown, *spec.slices[position + 1 :]]
    return {
        "size": sum(each.size for each in slices),
        "slices": [without_nulls(msgspec.to_builtins(each)) for each in slices],
    }


def without_nulls(value: Any) -> Any:
    """``value`` with the unset (None) members of its objects left out, as the allocator writes."""
    if isinstance(value, dict):
        return {key: without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [without_nulls(item) for item in value]
    return value


def _seated_in_legacy(spec: PlacementSpec, *, pod: str, node: str) -> dict[str, Any]:
    """The spec patch that adds ``pod`` to a first-release record (pods as plain names)."""

    def add(member: LegacyMember | None, slot: int) -> LegacyMember:
        if member is None:
            return LegacyMember(node=node, slot=slot, gpus=1, pods=(pod,))
        return msgspec.structs.replace(member, gpus=member.gpus + 1, pods=(*member.pods, pod))

    members = _with_member(spec.members, node, add)
    return {
        "size": sum(len(member.pods) for member in members),
        "members": [without_nulls(msgspec.to_builtins(member)) for member in members],
    }


def pod_uid(pod: str) -> str:
    """The uid of the pod named ``pod`` in these tests (the scheduler's reservedFor entry and
    the allocator's seat both carry it)."""
    return f"uid-{pod}"


async def seat_pod(
    client: KubeClient, domain: Domain, *, pod: str, node: str, uid: str | None = None
) -> None:
    """Record ``pod`` (its uid: ``uid``, default :func:`pod_uid`) on ``node`` in the domain's
    Placement, as the allocator does before it pins the pod (in the slice of the domain's
    clique; nothing when the pod is seated already). A legacy record seats names only."""
    raw = await client.get(PLACEMENTS, domain.name, namespace=domain.namespace)
    spec = msgspec.json.decode(raw, type=Placement).spec
    if any(p.name == pod for piece in spec.all_slices for m in piece.members for p in m.pods):
        return
    if domain.legacy:
        patch = _seated_in_legacy(spec, pod=pod, node=node)
    else:
        patch = _seated_in_slice(
            spec, clique=domain.clique, pod=pod, uid=uid or pod_uid(pod), node=node
        )
    await client.patch(PLACEMENTS, domain.name, {"spec": patch}, namespace=domain.namespace)


async def create_claim(
    client: KubeClient,
    *,
    namespace: str,
    name: str,
    domain: Domain | None,
    node: str,
    device: str = "attach-0",
    labels: dict[str, str] | None = None,
    pod: str | None = None,
    uid: str | None = None,
    reserve: bool = True,
    seat: bool = True,
) -> Claim:
    """A claim as made from the domain's template for ``pod`` (default ``<name>-pod``; its uid
    ``uid``, default :func:`pod_uid`), allocated on ``node`` and reserved for the pod as the
    scheduler does (``reserve``), the pod seated on ``node`` in the domain's Placement as the
    allocator does (``seat``)."""
    await ensure_namespace(client, namespace)
    pod_name = pod or f"{name}-pod"
    if domain is not None and seat:
        await seat_pod(client, domain, pod=pod_name, node=node, uid=uid)
    claim_labels = dict(labels or {})
    if domain is not None and labels is None:
        claim_labels = {DOMAIN_LABEL: domain.name, DOMAIN_UID_LABEL: domain.uid}
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "labels": claim_labels},
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
    created = msgspec.json.decode(
        await client.create(RESOURCE_CLAIMS, body, namespace=namespace), type=KubeObject
    )
    allocation = {
        "devices": {
            "results": [
                {"request": "channel", "driver": DRIVER_NAME, "pool": node, "device": device}
            ]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        },
    }
    status: dict[str, Any] = {"allocation": allocation}
    if reserve:
        reserved = {"resource": "pods", "name": pod_name, "uid": uid or pod_uid(pod_name)}
        status["reservedFor"] = [reserved]
    await client.patch(
        RESOURCE_CLAIMS, name, {"status": status}, namespace=namespace, subresource="status"
    )
    return Claim(namespace=namespace, uid=created.metadata.uid, name=name)


@contextlib.asynccontextmanager
async def imex_cluster(
    *,
    client: KubeClient,
    bus_factory: Callable[..., Any],
    topology: Cluster,
    root_factory: Callable[[], Path],
    work: Path,
) -> AsyncIterator[ImexCluster]:
    cluster = ImexCluster(
        client=client,
        bus_factory=bus_factory,
        topology=topology,
        root_factory=root_factory,
        work=work,
    )
    try:
        yield cluster
    finally:
        await cluster.close()


@contextlib.asynccontextmanager
async def one_node_cluster(
    *,
    client: KubeClient,
    bus_factory: Callable[..., Any],
    root_factory: Callable[[], Path],
    work: Path,
) -> AsyncIterator[tuple[ImexCluster, Path]]:
    """A cluster of one node (CRDs installed), and its topology written to
    ``work/topology.yaml`` for a node's agent run as a program of its own."""
    await install(client)
    text = random_topology_text(racks=1, nodes=1)
    topology_file = work / "topology.yaml"
    topology_file.write_text(text)
    async with imex_cluster(
        client=client,
        bus_factory=bus_factory,
        topology=parse_topology(text),
        root_factory=root_factory,
        work=work,
    ) as cluster:
        yield cluster, topology_file
