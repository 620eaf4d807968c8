"""DRA device taints: the scheduler allocates no device with an untolerated NoSchedule or
NoExecute taint, from the ResourceSlice or from a DeviceTaintRule; a tolerating request may."""

from __future__ import annotations

from typing import Any

from shared.kube.client import KubeClient
from shared.kube.resources import DEVICE_TAINT_RULES
from sim.scheduler import Scheduler
from tests.integration.scheduler.cluster import (
    claim,
    create_claim,
    create_class,
    create_node,
    create_pod,
    create_slice,
    device_class,
    get_claim,
    node,
    pod,
    resource_slice,
    wait_bound,
    wait_unschedulable,
)

DRIVER = "gpu.nvidia.com"
GPU_CLASS = "gpu.nvidia.com"
FAULT = {"key": "cdo.dev/gpu-fault", "value": "fatal", "effect": "NoExecute"}


def rule(name: str, device: str, taint: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": {
            "deviceSelector": {"driver": DRIVER, "pool": "n1", "device": device},
            "taint": taint,
        },
    }


async def one_node_two_gpus(client: KubeClient, *, gpu0_taints: list[dict[str, str]]) -> None:
    await create_node(client, node("n1", gpus=0))
    await create_class(client, device_class(GPU_CLASS, f'device.driver == "{DRIVER}"'))
    devices: list[dict[str, Any]] = [{"name": "gpu-0", "taints": gpu0_taints}, {"name": "gpu-1"}]
    await create_slice(
        client, resource_slice("n1-gpus", node_name="n1", driver=DRIVER, devices=devices)
    )


def gpu_claim(name: str, *, tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    body = claim(name, device_class_name=GPU_CLASS)
    if tolerations:
        body["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] = tolerations
    return body


async def allocated_device(client: KubeClient, name: str) -> str:
    allocation = (await get_claim(client, name)).status.allocation
    assert allocation is not None
    return allocation.devices.results[0].device


async def test_a_tainted_slice_device_is_skipped(
    kube_client: KubeClient, scheduler: Scheduler
) -> None:
    await one_node_two_gpus(kube_client, gpu0_taints=[FAULT])
    await create_claim(kube_client, gpu_claim("a"))
    await create_pod(kube_client, pod("a", claims=[{"name": "gpu", "resourceClaimName": "a"}]))
    assert await wait_bound(kube_client, "a") == "n1"
    assert await allocated_device(kube_client, "a") == "gpu-1"
    # The only device left is tainted: a second claim waits.
    await create_claim(kube_client, gpu_claim("b"))
    await create_pod(kube_client, pod("b", claims=[{"name": "gpu", "resourceClaimName": "b"}]))
    await wait_unschedulable(kube_client, "b", contains="cannot allocate all claims")


async def test_a_device_taint_rule_keeps_claims_off_and_a_toleration_lets_one_on(
    kube_client: KubeClient, scheduler: Scheduler
) -> None:
    await one_node_two_gpus(kube_client, gpu0_taints=[])
    await kube_client.create(DEVICE_TAINT_RULES, rule("gpu-0-fault", "gpu-0", FAULT))
    await kube_client.create(
        DEVICE_TAINT_RULES,
        rule("gpu-1-note", "gpu-1", {"key": "example.com/note", "effect": "None"}),
    )
    await create_claim(kube_client, gpu_claim("a"))
    await create_pod(kube_client, pod("a", claims=[{"name": "gpu", "resourceClaimName": "a"}]))
    assert await wait_bound(kube_client, "a") == "n1"
    assert await allocated_device(kube_client, "a") == "gpu-1"  # effect None does not block

    tolerating = [{"key": "cdo.dev/gpu-fault", "operator": "Exists", "effect": "NoExecute"}]
    await create_claim(kube_client, gpu_claim("b", tolerations=tolerating))
    await create_pod(kube_client, pod("b", claims=[{"name": "gpu", "resourceClaimName": "b"}]))
    assert await wait_bound(kube_client, "b") == "n1"
    assert await allocated_device(kube_client, "b") == "gpu-0"


async def test_deleting_the_rule_frees_the_device(
    kube_client: KubeClient, scheduler: Scheduler
) -> None:
    await one_node_two_gpus(kube_client, gpu0_taints=[])
    await kube_client.create(DEVICE_TAINT_RULES, rule("gpu-0-fault", "gpu-0", FAULT))
    await kube_client.create(
        DEVICE_TAINT_RULES, rule("gpu-1-fault", "gpu-1", {**FAULT, "effect": "NoSchedule"})
    )
    await create_claim(kube_client, gpu_claim("a"))
    await create_pod(kube_client, pod("a", claims=[{"name": "gpu", "resourceClaimName": "a"}]))
    await wait_unschedulable(kube_client, "a", contains="cannot allocate all claims")
    await kube_client.delete(DEVICE_TAINT_RULES, "gpu-1-fault")
    assert await wait_bound(kube_client, "a") == "n1"
    assert await allocated_device(kube_client, "a") == "gpu-1"
