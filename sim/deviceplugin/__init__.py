"""NVIDIA's device plugin (k8s-device-plugin) for ``nvidia.com/gpu``, as the simulator runs it.

    plugin = NvidiaDevicePlugin(kubelet_root=fleet.kubelet_root(name))
    group.create_task(plugin.run())      # in the node's NVML context
    plugin.registered                    # registered with the node's kubelet

What it does and where it follows the real plugin: docs/simulated-device-plugin.md.
"""

from sim.deviceplugin.health import SKIPPED_XIDS, makes_unhealthy
from sim.deviceplugin.plugin import NvidiaDevicePlugin

__all__ = ["SKIPPED_XIDS", "NvidiaDevicePlugin", "makes_unhealthy"]
