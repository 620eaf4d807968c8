"""The simulated GPU kubelet plugin over real gRPC: it registers through the node's
plugins_registry directory, publishes one device per GPU of the node's simulated NVML with
NVIDIA's attributes and capacity, prepares and unprepares claims allocated its GPUs (CDI spec
written, then removed), refuses a claim holding another node's GPU, and taints a GPU's device
after an XID where the cluster's release honours device taints."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from shared.crds.names import GPU_DEVICE_CLASS, GPU_DRA_DRIVER
from shared.kube.client import KubeClient
from shared.kube.nodeslice import slice_name
from shared.kube.resources import NAMESPACES, NODES, RESOURCE_CLAIMS, RESOURCE_SLICES
from shared.kubeletapi import Claim, PluginWatcher
from sim.gpudriver import GpuKubeletPlugin
from sim.nvml import SimulatedNvml, bound_context
from sim.topology import Node, parse_topology
from tests.integration.kubeletapi.helpers import running_watcher
from tests.support.releases import at_release
from tests.support.wait import wait_for

TOPOLOGY = """
name: gpu-plugin-test
nodes_per_rack: 1
racks:
  - name: rack-0
    gpu_api: dra
"""
NAMESPACE = "team-a"


@pytest.fixture
def topology_node() -> Node:
    return parse_topology(TOPOLOGY).nodes[0]


@pytest.fixture
def node_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gpu")


class Running(msgspec.Struct, frozen=True, kw_only=True, dict=True):
    plugin: GpuKubeletPlugin
    nvml: SimulatedNvml
    watcher: PluginWatcher
    client: KubeClient
    node: Node


@pytest.fixture
def publish_taints() -> bool:
    """Whether the cluster's release honours device taints (parametrize to change)."""
    return True


@pytest.fixture
async def running(
    kube_client: KubeClient, topology_node: Node, node_root: Path, publish_taints: bool
) -> AsyncIterator[Running]:
    await kube_client.create(NODES, {"metadata": {"name": topology_node.name}})
    await kube_client.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
    nvml = SimulatedNvml(topology_node)
    plugin = GpuKubeletPlugin(
        node=topology_node.name,
        client=kube_client,
        kubelet_root=node_root,
        cdi_root=node_root / "cdi",
        publish_taints=publish_taints,
    )
    task = asyncio.create_task(plugin.run(), context=bound_context(nvml))
    try:
        async with running_watcher(node_root) as watcher:
            await wait_for(lambda: GPU_DRA_DRIVER in watcher.plugins, timeout=10, what="plugin")
            yield Running(
                plugin=plugin, nvml=nvml, watcher=watcher, client=kube_client, node=topology_node
            )
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def published(client: KubeClient, node: str) -> dict[str, dict[str, Any]]:
    raw = await client.get_or_none(RESOURCE_SLICES, slice_name(node, GPU_DRA_DRIVER))
    if raw is None:
        return {}
    spec: dict[str, Any] = msgspec.json.decode(raw)["spec"]
    assert spec["driver"] == GPU_DRA_DRIVER and spec["nodeName"] == node
    devices: list[dict[str, Any]] = spec.get("devices") or []
    return {device["name"]: device for device in devices}


async def wait_published(running: Running) -> dict[str, dict[str, Any]]:
    async def devices() -> dict[str, dict[str, Any]] | None:
        return await published(running.client, running.node.name) or None

    found: dict[str, dict[str, Any]] = await wait_for(devices, timeout=10, what="GPU ResourceSlice")
    return found


async def allocated_claim(client: KubeClient, name: str, devices: list[tuple[str, str]]) -> Claim:
    """A claim as the scheduler leaves it: allocated ``(pool, device)`` GPUs."""
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpus",
                        "exactly": {"deviceClassName": GPU_DEVICE_CLASS, "count": len(devices)},
                    }
                ]
            }
        },
    }
    made = msgspec.json.decode(await client.create(RESOURCE_CLAIMS, body, namespace=NAMESPACE))
    results = [
        {"request": "gpus", "driver": GPU_DRA_DRIVER, "pool": pool, "device": device}
        for pool, device in devices
    ]
    status = {"allocation": {"devices": {"results": results}}}
    await client.patch(
        RESOURCE_CLAIMS, name, {"status": status}, namespace=NAMESPACE, subresource="status"
    )
    return Claim(namespace=NAMESPACE, name=name, uid=made["metadata"]["uid"])


async def test_the_slice_lists_every_gpu_with_nvidias_attributes(running: Running) -> None:
    devices = await wait_published(running)
    assert sorted(devices) == [f"gpu-{gpu.minor_number}" for gpu in running.node.gpus]
    for gpu in running.node.gpus:
        device = devices[f"gpu-{gpu.minor_number}"]
        assert device["attributes"] == {
            "type": {"string": "gpu"},
            "uuid": {"string": gpu.uuid},
            "index": {"int": gpu.index},
            "minor": {"int": gpu.minor_number},
            "productName": {"string": "NVIDIA GB200"},
            "brand": {"string": "Nvidia"},
            "architecture": {"string": "Blackwell"},
            "cudaComputeCapability": {"version": "10.0.0"},
            "driverVersion": {"version": "570.133.20"},
            "cudaDriverVersion": {"version": "12.8.0"},
            "pcieBusID": {"string": gpu.pci_bus_id.lower()},
        }
        assert int(device["capacity"]["memory"]["value"]) > 100 * 2**30
        assert "taints" not in device


async def test_prepare_hands_the_claim_its_gpus_and_unprepare_takes_them_back(
    running: Running,
) -> None:
    await wait_published(running)
    node = running.node.name
    claim = await allocated_claim(running.client, "two", [(node, "gpu-1"), (node, "gpu-2")])
    client = running.watcher.client(GPU_DRA_DRIVER)
    result = (await client.prepare([claim]))[claim.uid]
    assert result.ok, result.error
    assert sorted(result.cdi_device_ids) == [
        f"k8s.gpu.nvidia.com/claim={claim.uid}-gpu-1",
        f"k8s.gpu.nvidia.com/claim={claim.uid}-gpu-2",
    ]
    assert {(d.pool_name, d.device_name) for d in result.devices} == {
        (node, "gpu-1"),
        (node, "gpu-2"),
    }
    driver = running.plugin.driver
    assert driver is not None
    spec = msgspec.json.decode(driver.spec_path(claim.uid).read_bytes())
    assert [d["containerEdits"]["deviceNodes"][0]["path"] for d in spec["devices"]] == [
        "/dev/nvidia1",
        "/dev/nvidia2",
    ]
    again = (await client.prepare([claim]))[claim.uid]
    assert again == result
    assert (await client.unprepare([claim]))[claim.uid].ok
    assert not driver.spec_path(claim.uid).exists()
    assert claim.uid not in driver.prepared
    assert (await client.unprepare([claim]))[claim.uid].ok  # unknown claims unprepare


async def test_a_claim_holding_another_nodes_gpu_is_refused(running: Running) -> None:
    await wait_published(running)
    claim = await allocated_claim(running.client, "elsewhere", [("other-node", "gpu-0")])
    result = (await running.watcher.client(GPU_DRA_DRIVER).prepare([claim]))[claim.uid]
    assert not result.ok
    assert "not a GPU of node" in result.error


async def test_an_xid_taints_the_gpus_device(running: Running) -> None:
    await wait_published(running)
    running.nvml.raise_xid(1, 79)
    running.nvml.raise_xid(2, 13)

    async def taints() -> dict[str, list[tuple[str, str, str]]] | None:
        devices = await published(running.client, running.node.name)
        found = {
            name: [(t["key"], t["value"], t["effect"]) for t in device.get("taints", [])]
            for name, device in devices.items()
        }
        return found if found.get("gpu-1") and found.get("gpu-2") else None

    found = await wait_for(taints, timeout=10, what="device taints")
    assert found == {
        "gpu-0": [],
        "gpu-1": [("gpu.nvidia.com/xid", "79", "NoSchedule")],
        "gpu-2": [("gpu.nvidia.com/xid", "13", "None")],
        "gpu-3": [],
    }


@pytest.mark.parametrize(
    ("emulator_config", "publish_taints"),
    [pytest.param(at_release("1.35")[0], False, id="1.35")],
)
async def test_where_device_taints_are_off_an_xid_leaves_the_slice_alone(
    running: Running,
) -> None:
    await wait_published(running)
    running.nvml.raise_xid(1, 79)
    await wait_for(lambda: running.plugin.ledger.taints(1) or None, timeout=10, what="XID seen")
    publisher = running.plugin.publisher
    assert publisher is not None
    await publisher.sync()  # a pass after the XID: nothing to write
    raw = await running.client.get(RESOURCE_SLICES, slice_name(running.node.name, GPU_DRA_DRIVER))
    spec = msgspec.json.decode(raw)["spec"]
    assert spec["pool"]["generation"] == 0  # never rewritten
    assert all("taints" not in device for device in spec["devices"])
