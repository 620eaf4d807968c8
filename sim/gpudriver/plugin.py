"""The simulated GPU kubelet plugin of one node, assembled: NVML, slice, DRA service, XID taints.

``run()`` reads the node's GPUs from NVML (:func:`inventory.read_gpus`, in the node's NVML
context), then until cancelled: publishes the node's ``gpu.nvidia.com`` ResourceSlice, serves
the DRA service to the kubelet (registered through the node's plugins_registry directory) with
:class:`driver.GpuDriver`, and watches NVML for XID events, which taint the GPU's device
(:mod:`taints`) and republish the slice where the cluster's release honours device taints
(``publish_taints``).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pynvml

from shared.crds.names import GPU_DRA_DRIVER
from shared.kube.client import KubeClient
from shared.kube.nodeslice import NodeSlicePublisher
from shared.kube.ownnode import own_node
from shared.kubeletapi import KubeletPlugin, PluginPaths
from shared.nvml import PynvmlNvml, subscribed, watch_events
from sim.gpudriver.driver import GpuDriver
from sim.gpudriver.inventory import GpuRecord, device_body, read_gpus
from sim.gpudriver.taints import TaintLedger

log = logging.getLogger("cdo.sim.gpudriver")


MANAGED_BY = "sim-gpu-kubelet-plugin"


class GpuKubeletPlugin:
    """NVIDIA's GPU DRA driver on one node, as the simulator runs it."""

    def __init__(
        self,
        *,
        node: str,
        client: KubeClient,
        kubelet_root: Path,
        cdi_root: Path,
        resync_s: float = 30.0,
        publish_taints: bool = True,
    ) -> None:
        self.node = node
        self.publish_taints = publish_taints
        """Whether XIDs become device taints in the slice: only where the cluster's release
        honours device taints (a server with DRADeviceTaints off drops them on every write)."""
        self._client = client
        self._kubelet_root = kubelet_root
        self._cdi_root = cdi_root
        self._resync_s = resync_s
        self.ledger = TaintLedger()
        self.gpus: tuple[GpuRecord, ...] = ()
        self.driver: GpuDriver | None = None
        self.plugin: KubeletPlugin | None = None
        self.publisher: NodeSlicePublisher | None = None

    @property
    def registered(self) -> bool:
        return self.plugin is not None and self.plugin.registered

    def devices(self) -> list[dict[str, Any]]:
        """The slice's devices now: every GPU, with its taints where they are published."""
        return [
            device_body(gpu, taints=self.ledger.taints(gpu.index) if self.publish_taints else None)
            for gpu in self.gpus
        ]

    async def run(self) -> None:
        node = await own_node(self._client, self.node)
        self.gpus = await asyncio.to_thread(read_gpus)
        paths = PluginPaths.for_driver(GPU_DRA_DRIVER, kubelet_root=self._kubelet_root)
        self.driver = GpuDriver(
            node=self.node,
            client=self._client,
            gpus=self.gpus,
            checkpoint=paths.plugin_socket.parent / "checkpoint.json",
            cdi_root=self._cdi_root,
        )
        self.plugin = KubeletPlugin(driver_name=GPU_DRA_DRIVER, handler=self.driver, paths=paths)
        self.publisher = NodeSlicePublisher(
            self._client,
            driver=GPU_DRA_DRIVER,
            managed_by=MANAGED_BY,
            node=self.node,
            node_uid=node.metadata.uid,
            devices=self.devices,
            resync_s=self._resync_s,
        )
        async with asyncio.TaskGroup() as group:
            group.create_task(self.publisher.run(), name=f"{self.node} gpu resourceslice")
            group.create_task(self.plugin.run(), name=f"{self.node} gpu kubelet plugin")
            group.create_task(self._watch_xids(), name=f"{self.node} gpu xids")

    async def _watch_xids(self) -> None:
        nvml = PynvmlNvml()
        await asyncio.to_thread(nvml.init)
        try:
            async with subscribed(nvml, event_types=pynvml.nvmlEventTypeXidCriticalError) as events:
                async for event in watch_events(events):
                    xid, gpu = event.xid, event.gpu_index
                    if xid is None or gpu is None:
                        continue
                    if not self.ledger.record(gpu, xid) or self.publisher is None:
                        continue
                    if self.publish_taints:
                        log.info("GPU device tainted", extra={"gpu": gpu, "xid": xid})
                        self.publisher.poke()
                    else:
                        log.info(
                            "XID not published as a device taint: device taints are off in "
                            "this cluster's release",
                            extra={"gpu": gpu, "xid": xid},
                        )
        finally:
            await asyncio.to_thread(nvml.shutdown)
