"""A health monitor running in-process on one simulated node, with its Node and its events."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from services.health_monitor.classification import DEFAULT_CLASSIFIER, Classifier
from services.health_monitor.monitor import HealthMonitor
from services.health_monitor.settings import MonitorSettings
from shared.bus import EventBus
from shared.crds.names import CLIQUE_LABEL, GPU_FAULT_TAINT, GPU_HEALTHY_CONDITION
from shared.events import Event, NodeFault, NodeRecovered
from shared.kube.client import KubeClient
from shared.kube.informer import Informer, InformerSettings
from shared.kube.models import Condition, Node, Taint
from shared.kube.resources import NODES
from shared.metrics import Metrics
from shared.nvml import PynvmlNvml
from sim.nvml import SimulatedNvml, bound_context
from sim.topology import Node as TopologyNode
from tests.support.wait import wait_for

# Fast enough for tests, slow enough to tell a hold-down from a reading.
FAST = MonitorSettings(
    read_interval_s=0.05,
    event_wait_s=0.05,
    hold_down_s=0.6,
    xid_latch_s=0.3,
    nvml_retry_s=0.05,
    nvml_retry_max_s=0.2,
    write_retry_s=0.05,
    write_retry_max_s=0.5,
    informer=InformerSettings(backoff_initial_s=0.05, backoff_max_s=0.5),
)

OTHER_TAINT = {"key": "example.com/maintenance", "value": "planned", "effect": "NoSchedule"}
OTHER_CONDITION = {
    "type": "Ready",
    "status": "True",
    "reason": "KubeletReady",
    "message": "kubelet is posting ready status",
}

_NODE = msgspec.json.Decoder(Node)


async def create_node(client: KubeClient, name: str) -> None:
    """A Node as a kubelet would have registered it, with a taint and condition of others."""
    await client.create(
        NODES,
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"taints": [OTHER_TAINT]},
        },
    )
    await client.patch(
        NODES,
        name,
        {"status": {"conditions": [OTHER_CONDITION]}},
        subresource="status",
        patch_type="strategic",
    )


@dataclass
class Harness:
    """One monitor and what it shows: the Node in the API and the events on NATS."""

    sim: SimulatedNvml
    topology: TopologyNode
    monitor: HealthMonitor
    client: KubeClient
    metrics: Metrics
    task: asyncio.Task[None] | None = None
    events: list[Event] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.topology.name

    @property
    def running(self) -> bool:
        """The monitor has neither crashed nor stopped."""
        return self.task is not None and not self.task.done()

    def gpu_uuid(self, gpu: int) -> str:
        return self.topology.gpus[gpu].uuid

    @property
    def clique(self) -> str:
        return f"{self.topology.cluster_uuid}.{self.topology.clique_id}"

    async def node(self) -> Node:
        return _NODE.decode(await self.client.get(NODES, self.name))

    async def fault_taint(self) -> Taint | None:
        node = await self.node()
        return next((t for t in node.spec.taints if t.key == GPU_FAULT_TAINT), None)

    async def condition(self) -> Condition | None:
        return (await self.node()).condition(GPU_HEALTHY_CONDITION)

    async def settled(self) -> Node:
        """Wait until the monitor has shown a healthy node (condition and clique labels)."""

        async def probe() -> Node | None:
            raw = await self.client.get_or_none(NODES, self.name)
            if raw is None:
                return None  # not registered yet
            node = _NODE.decode(raw)
            condition = node.condition(GPU_HEALTHY_CONDITION)
            healthy = condition is not None and condition.reason == "GpuHealthy"
            labelled = node.metadata.labels.get(CLIQUE_LABEL) == self.clique
            return node if healthy and labelled else None

        return await wait_for(probe, what="a healthy, labelled node")

    def faults(self) -> list[NodeFault]:
        return [event for event in self.events if isinstance(event, NodeFault)]

    def some_faults(self, count: int) -> list[NodeFault] | None:
        """The fault events once there are ``count`` of them (a probe for wait_for)."""
        faults = self.faults()
        return faults if len(faults) == count else None

    def recoveries(self) -> list[NodeRecovered]:
        return [event for event in self.events if isinstance(event, NodeRecovered)]

    def metric(self, name: str, **labels: str) -> float:
        value = self.metrics.registry.get_sample_value(name, labels)
        return 0.0 if value is None else float(value)


MonitorFactory = Callable[..., contextlib.AbstractAsyncContextManager[Harness]]


@contextlib.asynccontextmanager
async def running_monitor(
    *,
    topology: TopologyNode,
    client: KubeClient,
    publisher: EventBus,
    subscriber: EventBus,
    settings: MonitorSettings = FAST,
    classifier: Classifier = DEFAULT_CLASSIFIER,
    sim: SimulatedNvml | None = None,
    **monitor_options: Any,
) -> AsyncIterator[Harness]:
    """Run a monitor for ``topology`` on the simulated NVML ``sim`` until the block ends."""
    sim = sim or SimulatedNvml(topology)
    metrics = Metrics()
    monitor = HealthMonitor(
        node_name=topology.name,
        nvml=PynvmlNvml(),
        client=client,
        publisher=publisher,
        metrics=metrics,
        settings=settings,
        classifier=classifier,
        **monitor_options,
    )
    harness = Harness(sim=sim, topology=topology, monitor=monitor, client=client, metrics=metrics)

    async def collect(event: Event) -> None:
        if getattr(event, "node", None) == topology.name:
            harness.events.append(event)

    await subscriber.subscribe("cdo.v1.node.>", collect)
    await subscriber.nc.flush()  # the server knows the subscription before anything happens
    # Every NVML call the monitor makes, in its tasks and worker threads, goes to ``sim``.
    task = asyncio.create_task(monitor.run(), context=bound_context(sim))
    harness.task = task
    try:
        yield harness
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class TaintHistory:
    """Every effect the node's fault taint had, in order, as a watch on the Node saw them.

    ``effects`` starts with the first state seen and records each change (None: no taint).
    """

    def __init__(self, client: KubeClient, name: str) -> None:
        self.effects: list[str | None] = []
        self._informer = Informer(
            client,
            NODES,
            Node,
            field_selector=f"metadata.name={name}",
            settings=InformerSettings(backoff_initial_s=0.05),
        )
        self._informer.add_handler(self._on_node)
        self._task: asyncio.Task[None] | None = None

    def _on_node(self, _old: Node | None, new: Node | None) -> None:
        if new is None:
            return
        effect = next((t.effect for t in new.spec.taints if t.key == GPU_FAULT_TAINT), None)
        if not self.effects or self.effects[-1] != effect:
            self.effects.append(effect)

    @property
    def episodes(self) -> int:
        """How many times the taint appeared."""
        return sum(
            1
            for before, after in zip([None, *self.effects], self.effects, strict=False)
            if before is None and after is not None
        )

    async def __aenter__(self) -> TaintHistory:
        self._task = asyncio.create_task(self._informer.run())
        await self._informer.wait_synced()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
