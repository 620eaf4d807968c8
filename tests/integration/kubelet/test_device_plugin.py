"""The kubelet's device plugin API over real gRPC, with the simulated NVIDIA device plugin on
the node's simulated NVML: the kubelet offers no nvidia.com/gpu until the plugin registers on
device-plugins/kubelet.sock, then the GPUs the plugin lists by UUID; Allocate's
NVIDIA_VISIBLE_DEVICES reaches the pod; an XID the plugin does not skip takes its GPU out of
allocatable (one it skips does not); a restarted plugin and a restarted kubelet register again,
every GPU listed healthy; a plugin that goes leaves every device unhealthy."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import msgspec

from shared.kube.client import KubeClient
from shared.kube.keys import key_of
from shared.kubeletapi.podresources import PodResourcesClient
from sim.deviceplugin import NvidiaDevicePlugin
from sim.kubelet import SimulatedKubelet
from sim.kubelet.names import DEVICE_ENVS_ANNOTATION
from sim.nvml import SimulatedNvml, bound_context
from sim.topology import Cluster
from tests.integration.kubelet.conftest import FAST, KubeletFactory
from tests.integration.kubelet.helpers import get_node, get_pod, run_pod
from tests.support.wait import wait_for

GPU = "nvidia.com/gpu"
PLUGIN_ONLY = msgspec.structs.replace(FAST, gpu_devices="plugin")


@contextlib.asynccontextmanager
async def plugin_running(
    kubelet: SimulatedKubelet, nvml: SimulatedNvml
) -> AsyncIterator[NvidiaDevicePlugin]:
    """NVIDIA's device plugin on the kubelet's node, in the node's NVML context."""
    plugin = NvidiaDevicePlugin(
        kubelet_root=kubelet.device_plugins_dir.parent, watch_interval_s=0.05, retry_s=0.1
    )
    task = asyncio.create_task(plugin.run(), context=bound_context(nvml))
    try:
        yield plugin
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def gpus_reported(client: KubeClient, node: str) -> tuple[str | None, str | None]:
    found = await get_node(client, node)
    if found is None:
        return (None, None)
    return (found.status.capacity.get(GPU), found.status.allocatable.get(GPU))


async def wait_gpus(client: KubeClient, node: str, wanted: tuple[str | None, str | None]) -> None:
    async def reported() -> bool:
        return await gpus_reported(client, node) == wanted

    await wait_for(reported, timeout=10, what=f"{node} nvidia.com/gpu {wanted}")


async def test_gpus_come_from_the_registered_plugin_and_follow_its_health(
    kube_client: KubeClient, cluster: Cluster, kubelet_on: KubeletFactory
) -> None:
    node = cluster.nodes[0]
    uuids = [gpu.uuid for gpu in node.gpus]
    nvml = SimulatedNvml(node)
    async with kubelet_on(0, settings=PLUGIN_ONLY, plugin=False) as kubelet:
        await wait_for(lambda: kubelet.active, what="kubelet started")
        await wait_for(lambda: get_node(kube_client, node.name), what="node registered")
        assert await gpus_reported(kube_client, node.name) == (None, None)
        async with plugin_running(kubelet, nvml) as plugin:
            await wait_gpus(kube_client, node.name, ("4", "4"))
            assert plugin.registered

            await run_pod(kube_client, "one", node=node.name, gpus=1)

            async def envs() -> dict[str, dict[str, str]] | None:
                pod = await get_pod(kube_client, "one")
                text = pod.metadata.annotations.get(DEVICE_ENVS_ANNOTATION) if pod else None
                running = pod is not None and pod.status.phase == "Running"
                return json.loads(text) if text and running else None

            assert await wait_for(envs, what="pod one Running with envs") == {
                "main": {"NVIDIA_VISIBLE_DEVICES": uuids[0]}
            }

            nvml.raise_xid(1, 13)  # an application error NVIDIA's plugin skips
            nvml.raise_xid(2, 79)  # fallen off the bus: Unhealthy
            await wait_gpus(kube_client, node.name, ("4", "3"))
            client = PodResourcesClient(kubelet.pod_resources_socket)
            try:
                (allocatable,) = await client.allocatable()
                assert allocatable.ids == (uuids[0], uuids[1], uuids[3])
            finally:
                await client.close()

        # The plugin went: every device unhealthy, capacity kept.
        await wait_gpus(kube_client, node.name, ("4", "0"))

        # A new plugin registers again and lists every GPU afresh.
        async with plugin_running(kubelet, nvml) as plugin:
            await wait_gpus(kube_client, node.name, ("4", "4"))
            nvml.raise_xid(3, 48)
            await wait_gpus(kube_client, node.name, ("4", "3"))

            # A kubelet restart recreates kubelet.sock; the plugin starts again and registers.
            kubelet.power_off()
            await wait_for(lambda: not kubelet.active, what="kubelet stopped")
            kubelet.power_on()
            await wait_for(lambda: plugin.starts == 2 and plugin.registered, what="re-registered")
            await wait_gpus(kube_client, node.name, ("4", "4"))
            assert kubelet.device_plugins is not None and kubelet.device_plugins.registered
            # The pod kept its GPU across the restart (the device checkpoint).
            pod = await get_pod(kube_client, "one")
            assert pod is not None
            held = kubelet.devices.assigned(key_of(pod), pod.metadata.uid)
            assert held is not None and held.containers == {"main": (uuids[0],)}
