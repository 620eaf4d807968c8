"""NVIDIA's GPU software on one hosted node, for one session of its services.

A node's topology says how its GPUs reach pods (``gpu_api``): through NVIDIA's device plugin
(``nvidia.com/gpu``, :class:`sim.deviceplugin.NvidiaDevicePlugin`), through NVIDIA's GPU DRA
driver (``gpu.nvidia.com``, :class:`sim.gpudriver.GpuKubeletPlugin`), or both. Both register
with the node's simulated kubelet below its directory (``layout.kubelet_root``) and read the
node's simulated NVML, so they run in the node's NVML context like its services.
"""

from __future__ import annotations

from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from shared.kube.client import KubeClient
from sim.deviceplugin import NvidiaDevicePlugin
from sim.gpudriver import GpuKubeletPlugin
from sim.nodehost.settings import NodeLayout
from sim.release import DeviceTaintSupport
from sim.topology import Node as TopologyNode


@dataclass(frozen=True)
class GpuPlugins:
    """The node's GPU DRA driver and device plugin (None where its GPUs do not use one)."""

    dra: GpuKubeletPlugin | None
    device_plugin: NvidiaDevicePlugin | None

    @classmethod
    def for_node(
        cls,
        node: TopologyNode,
        *,
        client: KubeClient,
        layout: NodeLayout,
        device_taints: DeviceTaintSupport,
    ) -> GpuPlugins:
        """The node's plugins; the DRA driver publishes XID taints where the cluster's release
        honours device taints."""
        kubelet_root = layout.kubelet_root(node.name)
        dra = (
            GpuKubeletPlugin(
                node=node.name,
                client=client,
                kubelet_root=kubelet_root,
                cdi_root=layout.node_dir(node.name) / "cdi",
                publish_taints=device_taints.taints,
            )
            if node.gpu_dra
            else None
        )
        device_plugin = (
            NvidiaDevicePlugin(kubelet_root=kubelet_root) if node.device_plugin else None
        )
        return cls(dra=dra, device_plugin=device_plugin)

    def runs(self) -> dict[str, Coroutine[Any, Any, None]]:
        """What to run for the session, by task name suffix."""
        found: dict[str, Coroutine[Any, Any, None]] = {}
        if self.dra is not None:
            found["gpu driver"] = self.dra.run()
        if self.device_plugin is not None:
            found["device plugin"] = self.device_plugin.run()
        return found

    def gpu_reset(self) -> None:
        """The node's GPUs were reset: NVIDIA's device plugin, which never marks a GPU healthy
        again by itself, is restarted (as an operator restarts its pod after a reset)."""
        if self.device_plugin is not None:
            self.device_plugin.restart()

    @property
    def dra_registered(self) -> bool | None:
        """The DRA driver's kubelet plugin is registered; None on a node without it."""
        return None if self.dra is None else self.dra.registered

    @property
    def device_plugin_registered(self) -> bool | None:
        """The device plugin is registered with the kubelet; None on a node without it."""
        return None if self.device_plugin is None else self.device_plugin.registered

    @property
    def registered(self) -> bool:
        """Every plugin the node has is registered."""
        return self.dra_registered is not False and self.device_plugin_registered is not False
