"""Every hollow node of a simulated cluster, served by one set of tasks in one event loop.

    hollow = HollowNodes(nodes, client=client, root=state_dir / "nodes", settings=kubelet)
    supervisor.start("hollow nodes", hollow.run())
    await hollow.wait_ready()

A full node has a :class:`sim.kubelet.SimulatedKubelet` of its own (two watches, a plugin
watcher, gRPC servers for the device plugins and PodResources) and its services in the node
host. A hollow node has what the control plane sees of a node, at a fraction of the cost, as
kubemark's hollow nodes and KWOK do for Kubernetes' scale tests:

- **the kubelet's Node and Lease**: registered with the same labels, capacity (its GPUs as
  ``nvidia.com/gpu``, listed by the kubelet itself: no device plugin runs) and conditions as a
  full node (:mod:`sim.kubelet.nodeobject`); the Lease renewed every
  ``heartbeat_interval_s`` by one loop for all nodes; status patched when it differs or every
  ``status_report_interval_s``;
- **the kubelet's pods**: the full kubelet's reconcile (:class:`sim.kubelet.podsync.PodSync`:
  claims checked and prepared, Running with its CDI devices, graceful deletion, run-seconds,
  NoExecute taint eviction) per node, fed by one informer of every pod and one work queue;
  claims are prepared by the node's in-process plugins (:mod:`sim.hollow.plugins`);
- **what the node's IMEX agent and health monitor write** (:mod:`sim.hollow.nodeservices`):
  clique labels, ``cdo.dev/imex-*`` annotations, ``GpuHealthy``, ``ImexReady`` and
  ``CdiEnabled`` True, and the ``compute-domain.cdo.dev`` ResourceSlice; folded into the
  registration, kept there (a node whose labels or conditions are taken away gets them back),
  the slice made again when the Node is.

What a hollow node does not have (docs/simulator.md#hollow-racks): NVML, an IMEX daemon, NATS
connections, NodeFault/NodeImexState events, the agent's prepare checks, fault injection, a
power switch, unix sockets (no device plugin, DRA or PodResources gRPC).
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec

from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.informer import Informer, InformerSettings
from shared.kube.keys import ObjectKey, key_of
from shared.kube.ratelimit import RateLimitSettings
from shared.kube.reconcile import ReconcileRunner, Result, RunnerSettings
from shared.kube.recorder import EventRecorder
from shared.kube.resources import LEASES, NODES, PODS, RESOURCE_SLICES
from shared.kube.workqueue import WorkQueue
from shared.kubeletapi.deviceplugin import DEVICE_PLUGIN_DIR
from shared.metrics import Metrics
from sim.hollow import nodeservices
from sim.hollow.plugins import HollowPlugins
from sim.kubelet import names, nodeobject
from sim.kubelet.checkpoint import Checkpoint
from sim.kubelet.deviceplugins import DevicePlugins
from sim.kubelet.devices import DeviceCheckpoint, DeviceManager
from sim.kubelet.dra import DraManager
from sim.kubelet.models import Node, Pod
from sim.kubelet.podips import PodAddresses
from sim.kubelet.podsync import PodSync
from sim.kubelet.settings import KubeletSettings
from sim.kubelet.timefmt import micro_time, utcnow
from sim.topology import Node as TopologyNode

log = logging.getLogger("cdo.sim.hollow")

_node_decoder = msgspec.json.Decoder(Node)

REGISTRATIONS_AT_ONCE = 32
"""Nodes registered concurrently at start."""
HEARTBEAT_TICK_S = 0.25
"""The heartbeat loop renews a share of the Leases this often, so renewals spread evenly."""
POD_WORKERS = 32
NODE_WORKERS = 8
_POD_NODE_INDEX = "node"


class HollowNode:
    """One hollow node's kubelet state: its pod reconcile, devices, checkpoint and plugins."""

    def __init__(
        self,
        node: TopologyNode,
        *,
        client: KubeClient,
        root: Path,
        settings: KubeletSettings,
        pods: Informer[Pod],
        nodes: Informer[Node],
        metrics: Metrics,
    ) -> None:
        self.topology = node
        self.plugins = HollowPlugins(node.name)
        self.devices = DeviceManager(node, checkpoint=DeviceCheckpoint(), source="topology")
        checkpoint = Checkpoint()
        self.sync = PodSync(
            node_name=node.name,
            client=client,
            pods=pods,
            nodes=nodes,
            dra=DraManager(client=client, watcher=self.plugins, checkpoint=checkpoint),
            devices=self.devices,
            # Never run: no plugin registers, so Allocate is answered from the node's GPUs.
            device_plugins=DevicePlugins(
                directory=root / node.name / DEVICE_PLUGIN_DIR,
                devices=self.devices,
                call_timeout=settings.device_plugin_call_timeout_s,
            ),
            recorder=EventRecorder(
                client, component="kubelet", instance=node.name, metrics=metrics
            ),
            addresses=PodAddresses(node.address),
            default_toleration_s=settings.default_toleration_s,
            retry_backoff_s=settings.retry_backoff_s,
            retry_backoff_max_s=settings.retry_backoff_max_s,
            finished=checkpoint.finished,
        )
        self.uid = ""
        """The uid of the Node as registered (its Lease and slice are owned by it)."""
        self.slice_for = ""
        """The Node uid the channel slice was made for ("" : not made)."""
        self.last_report = float("-inf")

    @property
    def name(self) -> str:
        return self.topology.name


class HollowNodes:
    """The hollow nodes of a cluster; see the module docstring."""

    def __init__(
        self,
        nodes: Sequence[TopologyNode],
        *,
        client: KubeClient,
        root: Path,
        settings: KubeletSettings | None = None,
        informer_settings: InformerSettings | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self._client = client
        self._settings = settings or KubeletSettings()
        self._metrics = metrics or Metrics()
        self.pods: Informer[Pod] = Informer(
            client, PODS, Pod, settings=informer_settings, metrics=self._metrics
        )
        self.nodes: Informer[Node] = Informer(
            client, NODES, Node, settings=informer_settings, metrics=self._metrics
        )
        self.pods.add_index(_POD_NODE_INDEX, lambda pod: [pod.spec.node_name])
        self._hollow = {
            node.name: HollowNode(
                node,
                client=client,
                root=root,
                settings=self._settings,
                pods=self.pods,
                nodes=self.nodes,
                metrics=self._metrics,
            )
            for node in nodes
        }
        self._node_of: dict[ObjectKey, str] = {}
        """The hollow node each pod key was last seen bound to (kept until it is synced gone)."""
        self._pod_queue: WorkQueue[ObjectKey] = WorkQueue(
            name="hollow-kubelet-pods",
            metrics=self._metrics,
            rate_limit=RateLimitSettings(
                backoff_base_s=self._settings.retry_backoff_s,
                backoff_max_s=self._settings.retry_backoff_max_s,
            ),
        )
        self._node_queue: WorkQueue[ObjectKey] = WorkQueue(
            name="hollow-nodes", metrics=self._metrics
        )
        self.heartbeat_lag_s = 0.0
        """How far the last round of Lease renewals finished behind its schedule."""

    def __contains__(self, name: object) -> bool:
        return name in self._hollow

    def __iter__(self) -> Iterator[HollowNode]:
        return iter(self._hollow.values())

    def __len__(self) -> int:
        return len(self._hollow)

    def __getitem__(self, name: str) -> HollowNode:
        return self._hollow[name]

    @property
    def ready(self) -> bool:
        """Every hollow node registered, Ready, its services' objects published."""
        for hollow in self._hollow.values():
            current = self.nodes.cache.get(hollow.name)
            if current is None or not hollow.slice_for or hollow.slice_for != current.metadata.uid:
                return False
            ready = current.condition(names.READY)
            if ready is None or ready.status != "True":
                return False
            if not nodeservices.published(current, hollow.topology):
                return False
        return True

    async def wait_ready(self, poll_s: float = 0.2) -> None:
        while not self.ready:  # noqa: ASYNC110 - the caches change under many handlers
            await asyncio.sleep(poll_s)

    # -- running ----------------------------------------------------------------------------

    async def run(self) -> None:
        """Register every node, then keep them (Leases, status, services' objects, pods)."""
        self.pods.add_handler(self._pod_changed)
        self.nodes.add_handler(self._node_changed)
        pod_runner = ReconcileRunner(
            name="hollow-kubelet-pods",
            queue=self._pod_queue,
            reconcile=self._sync_pod,
            metrics=self._metrics,
            settings=RunnerSettings(
                workers=POD_WORKERS,
                reconcile_timeout_s=2 * self._settings.plugin_call_timeout_s + 30,
            ),
        )
        node_runner = ReconcileRunner(
            name="hollow-nodes",
            queue=self._node_queue,
            reconcile=self._sync_node,
            metrics=self._metrics,
            settings=RunnerSettings(workers=NODE_WORKERS),
        )
        started = time.monotonic()
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self.nodes.run(), name="hollow nodes: node informer")
                group.create_task(self.pods.run(), name="hollow nodes: pod informer")
                await self._register_all()
                log.info(
                    "hollow nodes registered",
                    extra={"nodes": len(self._hollow), "s": round(time.monotonic() - started, 1)},
                )
                group.create_task(self._heartbeat(), name="hollow nodes: heartbeat")
                await self.nodes.wait_synced()
                group.create_task(node_runner.run(), name="hollow nodes: node sync")
                group.create_task(self._resync_nodes(), name="hollow nodes: status ticker")
                await self.pods.wait_synced()
                group.create_task(pod_runner.run(), name="hollow nodes: pod sync")
        finally:
            self._pod_queue.shut_down()
            self._node_queue.shut_down()

    # -- registration -----------------------------------------------------------------------

    async def _register_all(self) -> None:
        slots = asyncio.Semaphore(REGISTRATIONS_AT_ONCE)

        async def one(hollow: HollowNode) -> None:
            async with slots:
                await self._retrying(hollow, "register node", self._register)

        async with asyncio.TaskGroup() as group:
            for hollow in self._hollow.values():
                group.create_task(one(hollow))

    async def _register(self, hollow: HollowNode) -> None:
        node = hollow.topology
        now = utcnow()
        body = nodeobject.registration_body(
            node,
            self._settings,
            labels=nodeservices.clique_labels(node),
            now=now,
            gpus=hollow.devices.counts(),
        )
        # The node's services' first writes, folded into the registration: one request.
        body["metadata"]["annotations"] = nodeservices.imex_annotations(node)
        body["status"]["conditions"] += nodeservices.conditions_body(now)
        try:
            created = _node_decoder.decode(await self._client.create(NODES, body))
        except KubeApiError as exc:
            if not exc.already_exists:
                raise
            raw = await self._client.patch(
                NODES, node.name, {"metadata": {"labels": body["metadata"]["labels"]}}
            )
            created = _node_decoder.decode(raw)
        hollow.uid = created.metadata.uid
        # Spread the periodic status reports over the interval rather than all at once.
        hollow.last_report = time.monotonic() - random.uniform(
            0, self._settings.status_report_interval_s
        )
        await self._renew(hollow)
        await self._make_slice(hollow, created.metadata.uid)

    async def _make_slice(self, hollow: HollowNode, node_uid: str) -> None:
        body = nodeservices.channel_slice(hollow.topology, node_uid=node_uid)
        try:
            await self._client.create(RESOURCE_SLICES, body)
        except KubeApiError as exc:
            if not exc.already_exists:
                raise
            name = body["metadata"]["name"]
            current = await self._client.get(RESOURCE_SLICES, name)
            body["metadata"]["resourceVersion"] = msgspec.json.decode(current)["metadata"][
                "resourceVersion"
            ]
            await self._client.replace(RESOURCE_SLICES, name, body)
        hollow.slice_for = node_uid

    async def _retrying(
        self, hollow: HollowNode, what: str, step: Callable[[HollowNode], Awaitable[None]]
    ) -> None:
        pause = 0.2
        while True:
            try:
                await step(hollow)
                return
            except KubeApiError as exc:
                if not (exc.retryable or exc.conflict or exc.not_found):
                    raise
                log.warning(
                    "%s failed; retrying",
                    what,
                    extra={"node": hollow.name, "error": str(exc), "pause_s": pause},
                )
            await asyncio.sleep(pause)
            pause = min(pause * 2, self._settings.status_update_interval_s)

    # -- heartbeat --------------------------------------------------------------------------

    async def _heartbeat(self) -> None:
        """Renew every Lease once per ``heartbeat_interval_s``, a share each tick."""
        order = list(self._hollow.values())
        interval = self._settings.heartbeat_interval_s
        per_tick = max(1, math.ceil(len(order) * HEARTBEAT_TICK_S / interval))
        while True:
            round_started = time.monotonic()
            for start in range(0, len(order), per_tick):
                due = round_started + (start // per_tick) * HEARTBEAT_TICK_S
                delay = due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                batch = order[start : start + per_tick]
                await asyncio.gather(*(self._renew_logged(h) for h in batch))
            elapsed = time.monotonic() - round_started
            lag = max(0.0, elapsed - interval)
            if lag > 0 and self.heartbeat_lag_s == 0:
                log.warning(
                    "the hollow nodes' Lease renewals fall behind",
                    extra={"nodes": len(order), "round_s": round(elapsed, 1)},
                )
            self.heartbeat_lag_s = lag
            if elapsed < interval:
                await asyncio.sleep(interval - elapsed)

    async def _renew_logged(self, hollow: HollowNode) -> None:
        try:
            await self._renew(hollow)
        except KubeApiError as exc:
            log.warning(
                "could not renew node lease", extra={"node": hollow.name, "error": str(exc)}
            )

    async def _renew(self, hollow: HollowNode) -> None:
        spec = {
            "holderIdentity": hollow.name,
            "leaseDurationSeconds": self._settings.lease_duration_s,
            "renewTime": micro_time(utcnow()),
        }
        try:
            await self._client.patch(
                LEASES, hollow.name, {"spec": spec}, namespace=names.NODE_LEASE_NAMESPACE
            )
        except KubeApiError as exc:
            if not exc.not_found:
                raise
            metadata: dict[str, Any] = {"name": hollow.name}
            if hollow.uid:
                metadata["ownerReferences"] = [
                    {"apiVersion": "v1", "kind": "Node", "name": hollow.name, "uid": hollow.uid}
                ]
            lease = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": metadata,
                "spec": spec,
            }
            await self._client.create(LEASES, lease, namespace=names.NODE_LEASE_NAMESPACE)

    # -- the Node: status, services' objects ------------------------------------------------

    def _node_changed(self, old: Node | None, new: Node | None) -> None:
        node = new or old
        if node is None or node.metadata.name not in self._hollow:
            return
        hollow = self._hollow[node.metadata.name]
        before = old.spec.taints if old is not None else ()
        after = new.spec.taints if new is not None else ()
        if before != after:
            hollow.sync.forget_taints(after)
            for pod in self.pods.cache.by_index(_POD_NODE_INDEX, hollow.name):
                self._pod_queue.add(key_of(pod))
        if new is None or self._needs_sync(hollow, new):
            self._node_queue.add(ObjectKey(name=hollow.name))

    def _needs_sync(self, hollow: HollowNode, current: Node) -> bool:
        node = hollow.topology
        return (
            not nodeobject.status_is_current(
                current, node, self._settings, gpus=hollow.devices.counts()
            )
            or not nodeobject.labels_are_current(
                current, node, self._settings, nodeservices.clique_labels(node)
            )
            or not nodeservices.published(current, node)
            or hollow.slice_for != current.metadata.uid
        )

    async def _resync_nodes(self) -> None:
        """Every ``status_update_interval_s``, each node whose status is due or differs."""
        while True:
            await asyncio.sleep(self._settings.status_update_interval_s)
            now = time.monotonic()
            for hollow in self._hollow.values():
                current = self.nodes.cache.get(hollow.name)
                due = now - hollow.last_report >= self._settings.status_report_interval_s
                if current is None or due or self._needs_sync(hollow, current):
                    self._node_queue.add(ObjectKey(name=hollow.name))

    async def _sync_node(self, key: ObjectKey) -> Result:
        hollow = self._hollow[key.name]
        node = hollow.topology
        current = self.nodes.cache.get(node.name)
        if current is None:
            raw = await self._client.get_or_none(NODES, node.name)
            if raw is None:
                await self._register(hollow)
                return Result()
            current = _node_decoder.decode(raw)
        hollow.uid = current.metadata.uid
        labels = nodeobject.node_labels(node, self._settings, nodeservices.clique_labels(node))
        if not nodeobject.labels_are_current(
            current, node, self._settings, nodeservices.clique_labels(node)
        ) or not nodeservices.published(current, node):
            patch = nodeservices.metadata_patch(node)
            patch["metadata"]["labels"] = labels
            await self._client.patch(NODES, node.name, patch)
        due = time.monotonic() - hollow.last_report >= self._settings.status_report_interval_s
        gpus = hollow.devices.counts()
        if (
            due
            or not nodeobject.status_is_current(current, node, self._settings, gpus=gpus)
            or not nodeservices.published(current, node)
        ):
            now = utcnow()
            status = nodeobject.status_body(
                node, self._settings, now=now, previous=current.status.conditions, gpus=gpus
            )
            if not nodeservices.published(current, node):
                status["conditions"] += nodeservices.conditions_body(now)
            await self._client.patch(
                NODES,
                node.name,
                {"metadata": {"uid": current.metadata.uid}, "status": status},
                subresource="status",
                patch_type="strategic",
            )
            hollow.last_report = time.monotonic()
        if hollow.slice_for != current.metadata.uid:
            await self._make_slice(hollow, current.metadata.uid)
        return Result()

    # -- pods -------------------------------------------------------------------------------

    def _pod_changed(self, old: Pod | None, new: Pod | None) -> None:
        pod = new or old
        if pod is None:
            return
        node = pod.spec.node_name
        if node not in self._hollow:
            return
        key = key_of(pod)
        self._node_of[key] = node
        self._pod_queue.add(key)

    async def _sync_pod(self, key: ObjectKey) -> Result:
        node = self._node_of.get(key)
        if node is None:
            return Result()
        result = await self._hollow[node].sync(key)
        if result == Result() and self.pods.cache.get(str(key)) is None:
            # Gone, and what it held released (a failed unprepare asks for a retry instead).
            self._node_of.pop(key, None)
        return result
