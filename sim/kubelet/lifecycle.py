"""The node lifecycle controller: notices dead kubelets, taints their nodes, evicts their pods.

    controller = NodeLifecycleController(client=client,
                                         settings=LifecycleSettings(node_monitor_grace_s=40))
    supervisor.start("node lifecycle", controller.run())

One reconcile loop keyed by node name, fed by informers of Nodes, node Leases
(``kube-node-lease``) and Pods:

- A heartbeat is a change of the node's Lease. Its age is judged by this process's clock from
  when the change was *seen* (as the real controller does), so clock skew cannot matter; a node
  seen for the first time gets a full grace period.
- No heartbeat for ``node_monitor_grace_s``: the kubelet's conditions become ``Unknown``
  (reason ``NodeStatusUnknown``) and a ``NodeNotReady`` Event is recorded.
- Lifecycle taints follow the Ready condition (:mod:`sim.kubelet.nodehealth`): the unreachable
  or not-ready taint, NoSchedule and NoExecute; removed once the kubelet reports Ready again.
- While a node is not Ready its pods are marked ``Ready=False`` and, when their tolerations of
  the node's NoExecute taints run out (300 s by default for the lifecycle taints), evicted:
  ``DisruptionTarget``, then a delete. Their controllers replace them elsewhere. On a Ready
  node the kubelet does this itself.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime
from typing import Any

import msgspec

from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.informer import Informer, InformerSettings
from shared.kube.keys import ObjectKey
from shared.kube.models import Taint
from shared.kube.reconcile import ReconcileRunner, Result, RunnerSettings
from shared.kube.recorder import EventRecorder
from shared.kube.resources import LEASES, NODES, PODS
from shared.kube.workqueue import WorkQueue
from shared.metrics import Metrics
from sim.kubelet import names, nodehealth, podstatus
from sim.kubelet.evict import evict_pod
from sim.kubelet.models import Lease, Node, Pod
from sim.kubelet.settings import LifecycleSettings
from sim.kubelet.timefmt import utcnow
from sim.kubelet.tolerations import TaintTimes, eviction_time, with_default_tolerations

log = logging.getLogger("cdo.sim.nodelifecycle")

_node_decoder = msgspec.json.Decoder(Node)
# A timer set for the moment the grace period ends fires a hair later, so the node is stale.
_TIMER_SLACK_S = 0.05
_CONFLICT_RETRY_S = 0.05


class _Probe(msgspec.Struct, kw_only=True):
    """The last heartbeat seen from a node: which Lease version, and when (monotonic)."""

    token: str
    seen: float


class NodeLifecycleController:
    """See the module docstring."""

    def __init__(
        self,
        *,
        client: KubeClient,
        settings: LifecycleSettings | None = None,
        informer_settings: InformerSettings | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self._client = client
        self._settings = settings or LifecycleSettings()
        self._metrics = metrics or Metrics()
        self._recorder = EventRecorder(
            client, component="node-controller", instance="sim", metrics=self._metrics
        )
        self.nodes = Informer(
            client, NODES, Node, settings=informer_settings, metrics=self._metrics
        )
        self.leases = Informer(
            client,
            LEASES,
            Lease,
            namespace=names.NODE_LEASE_NAMESPACE,
            settings=informer_settings,
            metrics=self._metrics,
        )
        self.pods = Informer(client, PODS, Pod, settings=informer_settings, metrics=self._metrics)
        self.pods.add_index("node", lambda pod: [pod.spec.node_name] if pod.spec.node_name else [])
        self._queue: WorkQueue[ObjectKey] = WorkQueue(name="node-lifecycle", metrics=self._metrics)
        self._runner = ReconcileRunner(
            name="node-lifecycle",
            queue=self._queue,
            reconcile=self._reconcile,
            metrics=self._metrics,
            settings=RunnerSettings(workers=self._settings.workers),
        )
        self._probes: dict[str, _Probe] = {}
        self._taint_times = TaintTimes()
        self.nodes.add_handler(self._on_node)
        self.leases.add_handler(self._on_lease)
        self.pods.add_handler(self._on_pod)

    @property
    def synced(self) -> bool:
        return self.nodes.synced and self.leases.synced and self.pods.synced

    async def run(self) -> None:
        """Watch and reconcile until cancelled."""
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self.leases.run(), name="node lifecycle: leases")
                group.create_task(self.pods.run(), name="node lifecycle: pods")
                await self.leases.wait_synced()
                await self.pods.wait_synced()
                # Nodes last: by the time one is judged, its Lease and pods are known.
                group.create_task(self.nodes.run(), name="node lifecycle: nodes")
                group.create_task(self._runner.run(), name="node lifecycle: workers")
        finally:
            self._queue.shut_down()

    # -- event handlers (enqueue only) --------------------------------------------------------

    def _on_node(self, old: Node | None, new: Node | None) -> None:
        node = new or old
        if node is not None:
            self._queue.add(ObjectKey(name=node.metadata.name))

    def _on_lease(self, old: Lease | None, new: Lease | None) -> None:
        lease = new or old
        if lease is None:
            return
        if new is not None:
            self._observe(new.metadata.name, new.metadata.resource_version)
        self._queue.add(ObjectKey(name=lease.metadata.name))

    def _on_pod(self, old: Pod | None, new: Pod | None) -> None:
        pod = new or old
        if pod is None or not pod.spec.node_name:
            return
        node = self.nodes.cache.get(pod.spec.node_name)
        if node is not None and nodehealth.ready_status(node) not in (None, "True"):
            self._queue.add(ObjectKey(name=pod.spec.node_name))

    def _observe(self, node_name: str, token: str) -> _Probe:
        probe = self._probes.get(node_name)
        if probe is None or probe.token != token:
            probe = _Probe(token=token, seen=time.monotonic())
            self._probes[node_name] = probe
        return probe

    # -- reconcile ------------------------------------------------------------------------------

    async def _reconcile(self, key: ObjectKey) -> Result:
        try:
            return await self._converge(key.name)
        except KubeApiError as exc:
            if not exc.conflict:
                raise
            # The kubelet (or another writer) got there first; the cache is about to catch up.
            return Result(requeue_after=_CONFLICT_RETRY_S)

    async def _converge(self, name: str) -> Result:
        node = self.nodes.cache.get(name)
        if node is None:
            self._probes.pop(name, None)
            self._taint_times.keep_only(name, ())
            return Result()
        lease = self.leases.cache.get(f"{names.NODE_LEASE_NAMESPACE}/{name}")
        probe = self._observe(name, lease.metadata.resource_version if lease else "")
        age = time.monotonic() - probe.seen
        grace = self._settings.node_monitor_grace_s
        now = utcnow()
        waits: list[float] = []
        if age > grace:
            node = await self._mark_unknown(node, now=now)
        else:
            waits.append(grace - age + _TIMER_SLACK_S)
        ready = nodehealth.ready_status(node)
        taints = nodehealth.lifecycle_taints(node.spec.taints, ready, now=now)
        if taints is not None:
            node = await self._set_taints(node, taints)
        self._taint_times.keep_only(name, node.spec.taints)
        if ready not in (None, "True"):
            waits.extend(await self._handle_pods(node, now=now))
        return Result(requeue_after=min(waits)) if waits else Result()

    async def _mark_unknown(self, node: Node, *, now: datetime) -> Node:
        conditions = nodehealth.unknown_conditions(node, now=now)
        if not conditions:
            return node
        body: dict[str, Any] = {
            "metadata": {"resourceVersion": node.metadata.resource_version},
            "status": {"conditions": conditions},
        }
        updated = await self._client.patch(
            NODES, node.metadata.name, body, subresource="status", patch_type="strategic"
        )
        log.info("node not ready: heartbeat stopped", extra={"node": node.metadata.name})
        await self._recorder.record(
            NODES,
            node,
            type_="Normal",
            reason=names.REASON_NODE_NOT_READY,
            message=f"Node {node.metadata.name} status is now: NodeNotReady",
        )
        return _node_decoder.decode(updated)

    async def _set_taints(self, node: Node, taints: tuple[Taint, ...]) -> Node:
        body = {
            "metadata": {"resourceVersion": node.metadata.resource_version},
            "spec": {"taints": [nodehealth.taint_json(t) for t in taints]},
        }
        updated = await self._client.patch(NODES, node.metadata.name, body)
        log.info(
            "node lifecycle taints set",
            extra={"node": node.metadata.name, "taints": [f"{t.key}:{t.effect}" for t in taints]},
        )
        return _node_decoder.decode(updated)

    async def _handle_pods(self, node: Node, *, now: datetime) -> list[float]:
        """Mark the node's pods not ready, evict those whose time is up; seconds to the next."""
        waits: list[float] = []
        for pod in self.pods.cache.by_index("node", node.metadata.name):
            if pod.metadata.deletion_timestamp is not None:
                continue
            if pod.status.phase in names.TERMINAL_PHASES:
                continue
            tolerations = with_default_tolerations(
                pod.spec.tolerations, seconds=self._settings.default_toleration_s
            )
            due = eviction_time(
                tolerations,
                node.spec.taints,
                added_at=lambda t: self._taint_times.added_at(node.metadata.name, t, now=now),
            )
            if due is not None and due <= now:
                await evict_pod(self._client, self._recorder, pod)
                continue
            if due is not None:
                waits.append((due - now).total_seconds())
            await self._mark_pod_not_ready(pod, now=now)
        return waits

    async def _mark_pod_not_ready(self, pod: Pod, *, now: datetime) -> None:
        ready = pod.condition(names.READY)
        if ready is None or ready.status != "True":
            return
        body = podstatus.not_ready(
            pod,
            reason=names.REASON_NODE_NOT_READY,
            message=f"node {pod.spec.node_name} is not ready",
            now=now,
        )
        try:
            await self._client.patch(
                PODS,
                pod.metadata.name,
                body,
                namespace=pod.metadata.namespace,
                subresource="status",
                patch_type="strategic",
            )
        except KubeApiError as exc:
            if not (exc.not_found or exc.code == 409):
                raise
