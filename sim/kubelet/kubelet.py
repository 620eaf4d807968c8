"""One simulated kubelet: the Node, its heartbeat, and the pods bound to it.

    kubelet = SimulatedKubelet(cluster.node("rack-0-tray00"), client=client,
                               plugins_dir=node_root / "plugins_registry")
    supervisor.start("kubelet rack-0-tray00", kubelet.run())
    kubelet.power_off()      # heartbeat, pod sync and plugin watcher stop
    kubelet.power_on()       # they start again, from a fresh LIST

While powered on, a session of tasks runs in one task group:

- the node agent (:mod:`sim.kubelet.heartbeat`): registration, Lease, status;
- an informer of the kubelet's own Node (``metadata.name``) and one of its pods
  (``spec.nodeName``);
- a PluginWatcher on ``plugins_dir`` (the node's plugins_registry directory);
- the device plugin Registration on ``device-plugins/kubelet.sock`` beside it, and the
  ListAndWatch stream of the plugin registered for ``nvidia.com/gpu``
  (:mod:`sim.kubelet.deviceplugins`);
- a work queue of pod keys and the workers that sync them (:mod:`sim.kubelet.podsync`).

Powering off cancels the session (the watcher drops its plugin connections); what the
kubelet prepared stays in its checkpoint, as it would on the node's disk. ``run`` returns
only when cancelled, and raises if a task of the session fails. Every kubelet keeps its state
in its own object, so many run in one process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from pathlib import Path

from shared.kube.client import KubeClient
from shared.kube.informer import Informer, InformerSettings
from shared.kube.keys import ObjectKey, key_of
from shared.kube.ratelimit import RateLimitSettings
from shared.kube.reconcile import ReconcileRunner, RunnerSettings
from shared.kube.recorder import EventRecorder
from shared.kube.resources import NODES, PODS
from shared.kube.workqueue import WorkQueue
from shared.kubeletapi import PluginWatcher
from shared.kubeletapi.deviceplugin import DEVICE_PLUGIN_DIR
from shared.kubeletapi.podresources import PodResourcesServer
from shared.metrics import Metrics
from sim.kubelet.checkpoint import Checkpoint
from sim.kubelet.deviceplugins import DevicePlugins
from sim.kubelet.devices import DeviceCheckpoint, DeviceManager
from sim.kubelet.dra import DraManager
from sim.kubelet.heartbeat import NodeAgent
from sim.kubelet.models import Node, Pod
from sim.kubelet.podips import PodAddresses
from sim.kubelet.podresources import KubeletPodResources
from sim.kubelet.podsync import PodSync
from sim.kubelet.settings import KubeletSettings
from sim.topology import Node as TopologyNode

log = logging.getLogger("cdo.sim.kubelet")


class _PoweredOffError(Exception):
    """Ends a session's task group when the node is powered off."""


class SimulatedKubelet:
    """The kubelet of one simulated node; see the module docstring."""

    def __init__(
        self,
        node: TopologyNode,
        *,
        client: KubeClient,
        plugins_dir: Path,
        settings: KubeletSettings | None = None,
        labels: Mapping[str, str] | None = None,
        informer_settings: InformerSettings | None = None,
        metrics: Metrics | None = None,
        powered: bool = True,
    ) -> None:
        self.node = node
        self._client = client
        self._plugins_dir = plugins_dir
        self._settings = settings or KubeletSettings()
        self._labels = dict(labels or {})
        self._informer_settings = informer_settings
        self._metrics = metrics or Metrics()
        self._recorder = EventRecorder(
            client, component="kubelet", instance=node.name, metrics=self._metrics
        )
        self._checkpoint = Checkpoint()
        self._status_changed = asyncio.Event()
        self.devices = DeviceManager(
            node,
            checkpoint=DeviceCheckpoint(),
            source=self._settings.gpu_devices,
            on_health_change=self._status_changed.set,
        )
        self.pod_resources_socket = plugins_dir.parent / "pod-resources" / "kubelet.sock"
        self.device_plugins_dir = plugins_dir.parent / DEVICE_PLUGIN_DIR
        self.device_plugins: DevicePlugins | None = None
        """The session's device plugin registrations (None while powered off)."""
        self._addresses = PodAddresses(node.address)
        self._powered = powered
        self._power_changed = asyncio.Event()
        self._active = False

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def powered(self) -> bool:
        """Whether the node is switched on (its session may still be starting or stopping)."""
        return self._powered

    @property
    def active(self) -> bool:
        """Whether a session of tasks is running now."""
        return self._active

    @property
    def prepared_claims(self) -> dict[str, tuple[str, ...]]:
        """Claim UID -> CDI ids of the claims this node has prepared (for tests and tools)."""
        return {uid: c.cdi_device_ids for uid, c in self._checkpoint.claims.items()}

    def power_off(self) -> None:
        """Stop heartbeat, status, pod sync and plugin watcher; ``run`` keeps waiting."""
        if self._powered:
            log.info("node powered off", extra={"node": self.name})
        self._powered = False
        self._power_changed.set()

    def power_on(self) -> None:
        """Start them again (a fresh LIST of everything, as after a reboot)."""
        if not self._powered:
            log.info("node powered on", extra={"node": self.name})
            # A reboot resets the GPUs and restarts the kubelet's device manager.
            self.devices.reboot()
        self._powered = True
        self._power_changed.set()

    async def run(self) -> None:
        """Run sessions while powered on, until cancelled."""
        while True:
            self._power_changed.clear()
            if not self._powered:
                await self._power_changed.wait()
                continue
            try:
                await self._session()
            except* _PoweredOffError:
                pass

    async def _session(self) -> None:
        name = self.name
        settings = self._settings
        pods = Informer(
            self._client,
            PODS,
            Pod,
            field_selector=f"spec.nodeName={name}",
            settings=self._informer_settings,
            metrics=self._metrics,
        )
        nodes = Informer(
            self._client,
            NODES,
            Node,
            field_selector=f"metadata.name={name}",
            settings=self._informer_settings,
            metrics=self._metrics,
        )
        watcher = PluginWatcher(
            registry_dir=self._plugins_dir,
            scan_interval=settings.plugin_scan_interval_s,
            call_timeout=settings.plugin_call_timeout_s,
        )
        queue: WorkQueue[ObjectKey] = WorkQueue(
            name="kubelet-pods",
            metrics=self._metrics,
            rate_limit=RateLimitSettings(
                backoff_base_s=settings.retry_backoff_s, backoff_max_s=settings.retry_backoff_max_s
            ),
        )
        device_plugins = DevicePlugins(
            directory=self.device_plugins_dir,
            devices=self.devices,
            call_timeout=settings.device_plugin_call_timeout_s,
        )
        sync = PodSync(
            node_name=name,
            client=self._client,
            pods=pods,
            nodes=nodes,
            dra=DraManager(client=self._client, watcher=watcher, checkpoint=self._checkpoint),
            devices=self.devices,
            device_plugins=device_plugins,
            recorder=self._recorder,
            addresses=self._addresses,
            default_toleration_s=settings.default_toleration_s,
            retry_backoff_s=settings.retry_backoff_s,
            retry_backoff_max_s=settings.retry_backoff_max_s,
            finished=self._checkpoint.finished,
        )
        runner = ReconcileRunner(
            name="kubelet-pods",
            queue=queue,
            reconcile=sync,
            metrics=self._metrics,
            settings=RunnerSettings(
                workers=settings.pod_workers,
                reconcile_timeout_s=2 * settings.plugin_call_timeout_s + 30,
            ),
        )
        pods.add_handler(lambda old, new: queue.add(key_of(new or old)))

        def node_changed(old: Node | None, new: Node | None) -> None:
            before = old.spec.taints if old is not None else ()
            after = new.spec.taints if new is not None else ()
            if before != after:
                sync.forget_taints(after)
                for pod in pods.cache.objects():
                    queue.add(key_of(pod))

        nodes.add_handler(node_changed)
        agent = NodeAgent(
            node=self.node,
            client=self._client,
            settings=settings,
            labels=self._labels,
            nodes=nodes,
            devices=self.devices,
            status_changed=self._status_changed,
        )
        pod_resources = PodResourcesServer(
            self.pod_resources_socket,
            KubeletPodResources(pods=pods.cache.objects, devices=self.devices),
        )
        await pod_resources.start()
        self.device_plugins = device_plugins
        self._active = True
        log.info("kubelet started", extra={"node": name})
        try:
            async with asyncio.TaskGroup() as group:
                scanned = asyncio.Event()
                group.create_task(self._watch_plugins(watcher, scanned), name=f"{name} plugins")
                group.create_task(nodes.run(), name=f"{name} node informer")
                group.create_task(pods.run(), name=f"{name} pod informer")
                group.create_task(agent.run(), name=f"{name} node agent")
                group.create_task(device_plugins.run(), name=f"{name} device plugins")
                # Pods are synced once the plugins already in place are registered, so that
                # a reboot does not begin with a round of "driver not registered" failures.
                await scanned.wait()
                group.create_task(runner.run(), name=f"{name} pod workers")
                group.create_task(self._recheck_prepared(pods, queue), name=f"{name} recheck")
                while self._powered:
                    self._power_changed.clear()
                    await self._power_changed.wait()
                raise _PoweredOffError
        finally:
            queue.shut_down()
            await pod_resources.stop()
            self.device_plugins = None
            self._active = False
            log.info("kubelet stopped", extra={"node": name})

    async def _watch_plugins(self, watcher: PluginWatcher, scanned: asyncio.Event) -> None:
        """PluginWatcher.run, telling when the first scan is done."""
        self._plugins_dir.mkdir(parents=True, exist_ok=True)
        try:
            while True:
                await watcher.scan()
                scanned.set()
                await asyncio.sleep(self._settings.plugin_scan_interval_s)
        finally:
            await watcher.close()

    async def _recheck_prepared(self, pods: Informer[Pod], queue: WorkQueue[ObjectKey]) -> None:
        """Queue every pod the checkpoint knows: those gone meanwhile must be unprepared."""
        await pods.wait_synced()
        for key in list(self._checkpoint.pods):
            queue.add(key)
