"""DRA device taints: the scheduler allocates no device with an untolerated NoSchedule or
NoExecute taint, from the ResourceSlice or from a DeviceTaintRule; a tolerating request may.
At older releases it reads rules where the release serves them, and runs without them where
it does not."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

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
from tests.support.releases import at_release, rules_opted_in

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


@pytest.mark.parametrize(
    ("emulator_config", "device_taints"),
    [pytest.param(*rules_opted_in("1.36"), id="1.36")],
)
async def test_at_1_36_rules_are_read_at_v1beta2(
    kube_client: KubeClient, scheduler: Scheduler
) -> None:
    beta = msgspec.structs.replace(DEVICE_TAINT_RULES, version="v1beta2")
    assert scheduler.taint_rules is not None and scheduler.taint_rules.resource == beta
    await one_node_two_gpus(kube_client, gpu0_taints=[])
    body = {**rule("gpu-0-fault", "gpu-0", FAULT), "apiVersion": beta.api_version}
    await kube_client.create(beta, body)
    await create_claim(kube_client, gpu_claim("a"))
    await create_pod(kube_client, pod("a", claims=[{"name": "gpu", "resourceClaimName": "a"}]))
    assert await wait_bound(kube_client, "a") == "n1"
    assert await allocated_device(kube_client, "a") == "gpu-1"


@pytest.mark.parametrize(
    ("emulator_config", "device_taints"), [pytest.param(*at_release("1.35"), id="1.35")]
)
async def test_at_1_35_the_scheduler_runs_without_rules_and_taints_do_not_count(
    kube_client: KubeClient, scheduler: Scheduler
) -> None:
    # Ready (the fixture waited) without watching DeviceTaintRules, which 1.35 does not serve.
    assert scheduler.taint_rules is None
    await one_node_two_gpus(kube_client, gpu0_taints=[FAULT])  # the server drops the taint
    await create_claim(kube_client, gpu_claim("a"))
    await create_claim(kube_client, gpu_claim("b"))
    for name in ("a", "b"):
        claims = [{"name": "gpu", "resourceClaimName": name}]
        await create_pod(kube_client, pod(name, claims=claims))
        assert await wait_bound(kube_client, name) == "n1"
    assert {await allocated_device(kube_client, n) for n in ("a", "b")} == {"gpu-0", "gpu-1"}
