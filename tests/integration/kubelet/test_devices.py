"""The kubelet's nvidia.com/gpu device manager, seen through its PodResources socket over gRPC."""

from __future__ import annotations

import pytest

from shared.kube.client import KubeClient
from shared.kube.resources import PODS
from shared.kubeletapi.deviceplugin import HEALTHY, UNHEALTHY
from shared.kubeletapi.podresources import PodResourcesClient, PodResourcesError
from sim.kubelet.models import Pod
from sim.topology import Cluster
from tests.integration.kubelet.conftest import KubeletFactory
from tests.integration.kubelet.helpers import NAMESPACE, get_node, get_pod, run_pod
from tests.support.wait import wait_for

GPU = "nvidia.com/gpu"


async def _running(client: KubeClient, name: str) -> Pod | None:
    pod = await get_pod(client, name)
    return pod if pod is not None and pod.status.phase == "Running" else None


async def test_pods_get_gpu_uuids_which_pod_resources_reports(
    kube_client: KubeClient, cluster: Cluster, kubelet_on: KubeletFactory
) -> None:
    node = cluster.nodes[0]
    uuids = [gpu.uuid for gpu in node.gpus]
    async with kubelet_on(0, plugin=False) as kubelet:
        client = PodResourcesClient(kubelet.pod_resources_socket)
        try:
            await run_pod(kube_client, "one", node=node.name, gpus=1)
            await run_pod(kube_client, "two", node=node.name, gpus=2)
            await wait_for(lambda: _running(kube_client, "one"), what="one Running")
            await wait_for(lambda: _running(kube_client, "two"), what="two Running")

            pods = {(p.namespace, p.name): p for p in await client.list_pods()}
            held = {
                name: pods[(NAMESPACE, name)].containers[0].devices[0].ids
                for name in ("one", "two")
            }
            assert sorted(held["one"] + held["two"]) == sorted(uuids[:3])
            assert not set(held["one"]) & set(held["two"])
            holders = await client.pods_holding(GPU, held["two"][:1])
            assert [p.name for p in holders] == ["two"]
            assert (await client.get(NAMESPACE, "one")).containers[0].devices[0].ids == held["one"]
            with pytest.raises(PodResourcesError) as missing:
                await client.get(NAMESPACE, "nobody")
            assert missing.value.code == "NOT_FOUND"

            # A device the plugin reports unhealthy leaves allocatable, and the Node's status.
            kubelet.devices.set_health(uuids[3], UNHEALTHY)
            (allocatable,) = await client.allocatable()
            assert (allocatable.resource, allocatable.ids) == (GPU, tuple(uuids[:3]))

            async def three_left() -> bool:
                found = await get_node(kube_client, node.name)
                return found is not None and found.status.allocatable.get(GPU) == "3"

            await wait_for(three_left, what="allocatable nvidia.com/gpu 3")
            assert (await get_node(kube_client, node.name)).status.capacity[GPU] == "4"  # type: ignore[union-attr]

            # The pod's devices survive a kubelet restart; when it ends they are free again.
            kubelet.power_off()
            await wait_for(lambda: not kubelet.active, what="kubelet stopped")
            kubelet.devices.set_health(uuids[3], HEALTHY)
            kubelet.power_on()
            await wait_for(lambda: kubelet.active, what="kubelet started")
            again = {(p.namespace, p.name): p for p in await client.list_pods()}
            assert again[(NAMESPACE, "two")].containers[0].devices[0].ids == held["two"]
            await kube_client.delete(PODS, "two", namespace=NAMESPACE)

            async def freed() -> bool:
                return all(p.name != "two" for p in await client.list_pods())

            await wait_for(freed, what="pod two gone from PodResources")
            await run_pod(kube_client, "three", node=node.name, gpus=3)
            await wait_for(lambda: _running(kube_client, "three"), what="three Running")
            got = (await client.get(NAMESPACE, "three")).containers[0].devices[0].ids
            assert not set(got) & set(held["one"])
        finally:
            await client.close()
