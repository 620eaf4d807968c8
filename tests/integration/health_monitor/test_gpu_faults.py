"""Faults confined to one GPU: a DRA GPU gets a DeviceTaintRule, a device-plugin GPU's pods are
evicted through PodResources; the Node is not tainted; node-level faults still taint it."""

from __future__ import annotations

import msgspec

from shared.crds.names import GPU_DEVICE_TAINT, GPU_DRA_DRIVER
from shared.events import NodeFault
from shared.kube.client import KubeClient
from shared.kube.models import DeviceTaintRule
from shared.kube.resources import DEVICE_TAINT_RULES, RESOURCE_SLICES
from tests.integration.health_monitor.harness import MonitorFactory
from tests.support.wait import wait_for


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
