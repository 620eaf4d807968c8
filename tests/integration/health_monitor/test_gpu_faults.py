"""Faults confined to one GPU: a DRA GPU gets a DeviceTaintRule, a device-plugin GPU's pods are
evicted through PodResources; the Node is not tainted; node-level faults still taint it."""

from __future__ import annotations

import msgspec
import pytest

from shared.crds.names import GPU_DEVICE_TAINT, GPU_DRA_DRIVER
from shared.events import NodeFault
from shared.kube.client import KubeClient
from shared.kube.models import DeviceTaintRule
from shared.kube.resources import DEVICE_TAINT_RULES, RESOURCE_SLICES
from shared.kubeletapi.podresources import PodResourcesClient
from sim.kubelet import KubeletSettings, SimulatedKubelet
from sim.topology import Cluster
from tests.integration.health_monitor.harness import MonitorFactory
from tests.integration.kubelet.helpers import get_node, get_pod, run_pod, running
from tests.support.wait import wait_for

KUBELET = KubeletSettings(
    heartbeat_interval_s=0.2, status_update_interval_s=0.5, retry_backoff_s=0.05,
    retry_backoff_max_s=0.5, plugin_scan_interval_s=0.05,
)  # fmt: skip


async def publish_gpus(client: KubeClient, node: str) -> None:
    """The node's GPUs as NVIDIA's GPU DRA driver publishes them: pool = node, gpu-<index>."""
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpu.nvidia.com"},
        "spec": {
            "driver": GPU_DRA_DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"gpu-{i}"} for i in range(4)],
        },
    }
    await client.create(RESOURCE_SLICES, body)


class _Rules(msgspec.Struct):
    items: list[DeviceTaintRule]


async def rules(client: KubeClient) -> dict[str, DeviceTaintRule]:
    items = msgspec.json.decode(await client.list(DEVICE_TAINT_RULES), type=_Rules).items
    return {rule.metadata.name: rule for rule in items}


async def test_a_fatal_fault_of_one_dra_gpu_is_a_device_taint_rule_not_a_node_taint(
    start_monitor: MonitorFactory, kube_client: KubeClient
) -> None:
    async with start_monitor(0) as h:
        await publish_gpus(kube_client, h.name)
        await h.settled()
        h.sim.raise_xid(2, 79)
        name = f"cdo-gpu-fault-{h.name}-gpu-2"

        async def ruled() -> DeviceTaintRule | None:
            return (await rules(kube_client)).get(name)

        rule = await wait_for(ruled, what="a DeviceTaintRule for GPU 2")
        selector = rule.spec.device_selector
        assert selector is not None
        assert (selector.driver, selector.pool, selector.device) == (
            GPU_DRA_DRIVER,
            h.name,
            "gpu-2",
        )
        taint = rule.spec.taint
        assert (taint.key, taint.value, taint.effect) == (GPU_DEVICE_TAINT, "fatal", "NoExecute")
        assert rule.metadata.labels["cdo.dev/gpu-fault-node"] == h.name

        fault: NodeFault = (await wait_for(lambda: h.some_faults(1), what="NodeFault"))[0]
        assert (fault.gpu_index, fault.scope, fault.code) == (2, "gpu", 79)
        assert fault.gpus == (h.gpu_uuid(2),)
        condition = await h.condition()
        assert condition is not None
        assert (condition.status, condition.reason) == ("True", "GpuDeviceFault")
        assert "GPU 2" in condition.message
        assert await h.fault_taint() is None

        # The latch ends, then the hold-down: the rule goes.
        async def cleared() -> bool:
            return name not in await rules(kube_client)

        await wait_for(cleared, what="the DeviceTaintRule deleted after the hold-down")
        assert await h.fault_taint() is None


async def test_a_node_level_fault_still_taints_a_dra_node(
    start_monitor: MonitorFactory, kube_client: KubeClient
) -> None:
    async with start_monitor(1) as h:
        await publish_gpus(kube_client, h.name)
        await h.settled()
        h.sim.raise_xid(0, 74)  # NVLink error: the fabric is shared

        async def tainted() -> bool:
            taint = await h.fault_taint()
            return taint is not None and taint.effect == "NoExecute"

        await wait_for(tainted, what="the node's NoExecute fault taint")
        assert not [r for r in (await rules(kube_client)).values() if h.name in r.metadata.name]


async def test_every_gpu_lost_taints_the_node(
    start_monitor: MonitorFactory, kube_client: KubeClient
) -> None:
    async with start_monitor(2) as h:
        await publish_gpus(kube_client, h.name)
        await h.settled()
        for gpu in range(4):
            h.sim.set_gpu_lost(gpu)

        async def tainted() -> bool:
            taint = await h.fault_taint()
            return taint is not None and taint.effect == "NoExecute"

        await wait_for(tainted, what="the node's NoExecute fault taint")


async def test_a_restarted_monitor_deletes_a_rule_it_no_longer_wants(
    start_monitor: MonitorFactory, kube_client: KubeClient
) -> None:
    async with start_monitor(3) as h:
        name = h.name
    # A rule left by an earlier run of this node's monitor (its fault is gone now).
    await kube_client.create(
        DEVICE_TAINT_RULES,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceTaintRule",
            "metadata": {
                "name": f"cdo-gpu-fault-{name}-gpu-1",
                "labels": {"cdo.dev/gpu-fault-node": name},
            },
            "spec": {
                "deviceSelector": {"driver": GPU_DRA_DRIVER, "pool": name, "device": "gpu-1"},
                "taint": {"key": GPU_DEVICE_TAINT, "value": "fatal", "effect": "NoExecute"},
            },
        },
    )
    await publish_gpus(kube_client, name)
    async with start_monitor(3, register=False) as again:
        await again.settled()

        async def gone() -> bool:
            return not any(name in rule for rule in await rules(kube_client))

        await wait_for(gone, what="the stale rule deleted")


async def test_a_fatal_fault_of_one_device_plugin_gpu_evicts_only_its_pods(
    start_monitor: MonitorFactory,
    kube_client: KubeClient,
    cluster: Cluster,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    topology = cluster.nodes[4]
    kubelet = SimulatedKubelet(
        topology,
        client=kube_client,
        plugins_dir=tmp_path_factory.mktemp("k") / "plugins_registry",
        settings=KUBELET,
    )
    async with running(kubelet.run(), "kubelet"):
        client = PodResourcesClient(kubelet.pod_resources_socket)
        try:
            await wait_for(lambda: get_node(kube_client, topology.name), what="node registered")
            first = await run_pod(kube_client, "holds-0-1", node=topology.name, gpus=2)
            second = await run_pod(kube_client, "holds-2-3", node=topology.name, gpus=2)

            async def both_hold() -> bool:
                pods = {p.name: p for p in await client.list_pods()}
                return all(
                    n in pods and pods[n].containers[0].devices for n in ("holds-0-1", "holds-2-3")
                )

            await wait_for(both_hold, what="both pods holding their GPUs")
            holder = (await client.pods_holding("nvidia.com/gpu", [topology.gpus[2].uuid]))[0].name
            other = ({"holds-0-1", "holds-2-3"} - {holder}).pop()
            uids = {"holds-0-1": first.metadata.uid, "holds-2-3": second.metadata.uid}
            async with start_monitor(4, register=False, pod_resources=client) as h:
                await h.settled()
                h.sim.raise_xid(2, 79)

                async def evicted() -> bool:
                    return await get_pod(kube_client, holder) is None

                await wait_for(evicted, what=f"{holder} evicted")
                kept = await get_pod(kube_client, other)
                assert kept is not None and kept.metadata.uid == uids[other]
                assert await h.fault_taint() is None
                condition = await h.condition()
                assert condition is not None and condition.reason == "GpuDeviceFault"
                assert h.metric("cdo_health_gpu_actions_total", kind="eviction", result="ok") == 1
        finally:
            await client.close()
