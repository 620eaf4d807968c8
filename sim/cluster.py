"""The simulated cluster in one process: API emulator, kubelets, scheduler, controllers.

    async with SimulatedCluster.running(ClusterOptions(state_dir=tmp)) as cluster:
        cluster.kubeconfig            # for kubectl and every service
        cluster.topology.nodes        # racks, trays, cliques, addresses, GPUs
        cluster.power_off("rack-0-tray03"); cluster.power_on("rack-0-tray03")

What runs, at the Kubernetes release ``options.api`` presents (:mod:`sim.release`): the
Kubernetes API emulator over HTTP, one simulated kubelet per topology node
(registration, heartbeat Lease, pods, DRA calls to whatever plugins register on the node), the
scheduler (affinity, taints, resources, DRA allocation), the workload controllers (Deployment,
ReplicaSet, StatefulSet, Job, JobSet and LeaderWorkerSet with their CRDs, resource claims) and the
node lifecycle controller. cdo's own services run beside
it and reach it through ``kubeconfig``. Until the health monitor runs, ``label_cliques`` puts the
clique labels on the nodes directly (the monitor owns them once it runs).

With ``full_racks`` M, only the first M racks' nodes get a simulated kubelet each; every other
node is hollow (:mod:`sim.hollow`): the same Node, Lease, pods and the objects its IMEX agent and
health monitor would write, served for all of them by one set of tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.models import Node
from shared.kube.resources import DEVICE_CLASSES, NODES
from shared.metrics import Metrics
from sim.controllers import ControllerManager, ControllerSettings
from sim.gpudriver import device_class_manifest
from sim.hollow import HollowNodes, clique_labels
from sim.kubeapi import KubeServer, ServerConfig, serve
from sim.kubeapi.hosting.child_process import ApiProcess, serve_in_process_of_its_own
from sim.kubelet import (
    KubeletFleet,
    KubeletSettings,
    LifecycleSettings,
    NodeLifecycleController,
    SimulatedKubelet,
    connect_for_kubelets,
)
from sim.release import DeviceTaintSupport
from sim.scheduler import Scheduler, SchedulerSettings
from sim.topology import DEFAULT_TOPOLOGY, Cluster, load_topology

log = logging.getLogger("cdo.sim")

CLIQUE_LABEL = "nvidia.com/gpu.clique"
# Above this many nodes, readiness is polled less often: a LIST of every Node is not free.
_MANY_NODES = 200


@dataclass(frozen=True)
class ClusterOptions:
    """What to simulate and how; the defaults are the 2-rack GB200 cluster of the demo."""

    state_dir: Path
    topology: Path = DEFAULT_TOPOLOGY
    api_host: str = "127.0.0.1"
    api_port: int = 0
    label_cliques: bool = False
    api_process: bool = False
    """Run the API emulator as a process of its own (two cores) instead of in this one."""
    api: ServerConfig = field(default_factory=lambda: ServerConfig(pod_graceful_deletion=True))
    """The emulator's settings, its release (``kubernetes_version``, ``feature_gates``,
    ``runtime_config``) included: the scheduler and controllers run at that release."""
    kubelet: KubeletSettings = field(default_factory=KubeletSettings)
    lifecycle: LifecycleSettings = field(default_factory=LifecycleSettings)
    scheduler: SchedulerSettings = field(default_factory=SchedulerSettings)
    controllers: ControllerSettings = field(default_factory=ControllerSettings)
    full_racks: int | None = None
    """Only the first this many racks get a simulated kubelet per node; the others' nodes are
    hollow (:mod:`sim.hollow`). None: every rack is full."""

    def __post_init__(self) -> None:
        if self.full_racks is not None and self.full_racks < 0:
            raise ValueError(f"full_racks must be 0 or more, not {self.full_racks}")


class SimulatedCluster:
    """A running simulated cluster; create it with :meth:`running`."""

    def __init__(
        self,
        *,
        topology: Cluster,
        api: KubeServer | ApiProcess,
        client: KubeClient,
        fleet: KubeletFleet,
        scheduler: Scheduler,
        controllers: ControllerManager,
        lifecycle: NodeLifecycleController,
        metrics: Metrics,
        hollow: HollowNodes | None = None,
    ) -> None:
        self.topology = topology
        self.api = api
        self.client = client
        self.fleet = fleet
        self.hollow = hollow
        """The hollow nodes (None when every node is full)."""
        self.scheduler = scheduler
        self.controllers = controllers
        self.lifecycle = lifecycle
        self.metrics = metrics

    @property
    def kubeconfig(self) -> Path:
        return self.api.kubeconfig

    @property
    def url(self) -> str:
        return self.api.url

    def is_hollow(self, node: str) -> bool:
        return self.hollow is not None and node in self.hollow

    def power_off(self, node: str) -> None:
        """Cut a node's power: its kubelet stops, its heartbeat goes stale (HollowNodeError
        on a hollow node, which has no power switch)."""
        self._full(node).power_off()

    def power_on(self, node: str) -> None:
        self._full(node).power_on()

    def powered(self, node: str) -> bool:
        return True if self.is_hollow(node) else self.fleet[node].powered

    def _full(self, node: str) -> SimulatedKubelet:
        if self.is_hollow(node):
            raise HollowNodeError(
                f"{node} is a hollow node: it has no power switch (only the full racks' "
                "nodes do; docs/simulator.md#hollow-racks)"
            )
        return self.fleet[node]

    @classmethod
    @contextlib.asynccontextmanager
    async def running(cls, options: ClusterOptions) -> AsyncIterator[SimulatedCluster]:
        """Start everything, wait until it is ready, and stop it all on exit.

        A component that fails stops the cluster: the exception surfaces from the ``async
        with`` block's exit (or as soon as the block awaits something, via cancellation).
        """
        topology = load_topology(options.topology)
        full = topology.first_racks(options.full_racks)
        full_names = {node.name for node in full}
        hollow = [node for node in topology.nodes if node.name not in full_names]
        # The release the emulator presents is the one the simulated components run at.
        release = options.api.release()
        device_taints = DeviceTaintSupport.of(release)
        kubelet = options.kubelet
        if not kubelet.kubelet_version:
            kubelet = msgspec.structs.replace(kubelet, kubelet_version=f"v{release.version}.0-sim")
        options.state_dir.mkdir(parents=True, exist_ok=True)
        metrics = Metrics()
        # One setting for the toleration time: the API server's admission adds it to pods and
        # the node lifecycle controller evicts by it.
        api_config = msgspec.structs.replace(
            options.api, default_toleration_seconds=options.lifecycle.default_toleration_s
        )
        start = serve_in_process_of_its_own if options.api_process else serve
        api: KubeServer | ApiProcess
        async with start(
            config=api_config,
            host=options.api_host,
            port=options.api_port,
            kubeconfig=options.state_dir / "kubeconfig",
        ) as api:
            # The hollow nodes hold two watches in all, and many requests at once.
            client = await connect_for_kubelets(
                api.kubeconfig, kubelets=len(full) + (32 if hollow else 0)
            )
            try:
                if any(node.gpu_dra for node in topology.nodes):
                    await install_gpu_device_class(client)
                cluster = cls(
                    topology=topology,
                    api=api,
                    client=client,
                    fleet=KubeletFleet(
                        Cluster(name=topology.name, nodes=full),
                        client=client,
                        root=options.state_dir / "nodes",
                        settings=kubelet,
                        labels=clique_labels if options.label_cliques else None,
                        metrics=metrics,
                    ),
                    scheduler=Scheduler(
                        client,
                        settings=options.scheduler,
                        metrics=metrics,
                        device_taints=device_taints,
                    ),
                    controllers=ControllerManager(
                        client,
                        settings=options.controllers,
                        metrics=metrics,
                        device_taints=device_taints,
                    ),
                    lifecycle=NodeLifecycleController(
                        client=client, settings=options.lifecycle, metrics=metrics
                    ),
                    metrics=metrics,
                    hollow=HollowNodes(
                        hollow, client=client, root=options.state_dir / "nodes",
                        settings=kubelet, metrics=metrics,
                    ) if hollow else None,
                )  # fmt: skip
                async with asyncio.TaskGroup() as group:
                    parts = {
                        "kubelets": cluster.fleet.run(),
                        "scheduler": cluster.scheduler.run(),
                        "controllers": cluster.controllers.run(),
                        "node lifecycle": cluster.lifecycle.run(),
                    }
                    if cluster.hollow is not None:
                        parts["hollow nodes"] = cluster.hollow.run()
                    tasks = [group.create_task(coro, name=name) for name, coro in parts.items()]
                    try:
                        await cluster.wait_ready()
                        yield cluster
                    finally:
                        for task in tasks:
                            task.cancel()
            finally:
                await client.close()

    async def ready_nodes(self) -> set[str]:
        """Names of the nodes whose Ready condition is True now."""
        nodes = msgspec.json.decode(await self.client.list(NODES), type=_NodeList).items
        return {
            node.metadata.name
            for node in nodes
            if (ready := node.condition("Ready")) is not None and ready.status == "True"
        }

    async def wait_ready(self) -> None:
        """Until the scheduler and controllers have synced and every powered node is Ready."""
        await self.scheduler.wait_ready()
        await self.controllers.wait_synced()
        if self.hollow is not None:
            await self.hollow.wait_ready()
        wanted = {kubelet.name for kubelet in self.fleet if kubelet.powered}
        pause = 0.1 if len(self.topology.nodes) <= _MANY_NODES else 1.0
        while not wanted <= await self.ready_nodes():  # noqa: ASYNC110 - polling the API
            await asyncio.sleep(pause)


class HollowNodeError(Exception):
    """What a hollow node does not have (a power switch) was asked of it."""


async def install_gpu_device_class(client: KubeClient) -> None:
    """The ``gpu.nvidia.com`` DeviceClass, as NVIDIA's Helm chart installs it with its driver
    (on a cluster where some node runs the GPU DRA driver)."""
    try:
        await client.create(DEVICE_CLASSES, device_class_manifest())
    except KubeApiError as exc:
        if not exc.already_exists:
            raise


class _NodeList(msgspec.Struct):
    items: list[Node]
