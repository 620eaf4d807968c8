"""The device taint eviction controller: pods whose claims hold a device with an untolerated
NoExecute taint (slice or DeviceTaintRule) are deleted, tolerationSeconds delay it, and the
rule's status says EvictionInProgress. At older releases: none of it while DRADeviceTaints is
off, rules read at the alpha version 1.34 serves them at, without a status."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from shared.kube.client import KubeClient
from shared.kube.models import DeviceTaintRule, Pod
from shared.kube.resources import DEVICE_TAINT_RULES, PODS, RESOURCE_CLAIMS, RESOURCE_SLICES
from sim.controllers import ControllerManager
from tests.support.releases import at_release, rules_opted_in
from tests.support.wait import wait_for

NS = "default"
DRIVER = "gpu.nvidia.com"
FAULT = {"key": "cdo.dev/gpu-fault", "value": "fatal", "effect": "NoExecute"}


async def gpu_slice(client: KubeClient) -> None:
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "n1-gpus"},
        "spec": {
            "driver": DRIVER,
            "nodeName": "n1",
            "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"gpu-{i}"} for i in range(4)],
        },
    }
    await client.create(RESOURCE_SLICES, body)


async def pod_on_gpu(
    client: KubeClient, name: str, gpu: int, *, tolerations: list[dict[str, Any]] | None = None
) -> None:
    """A claim allocated GPU ``gpu`` of n1, and a running pod using it (the scheduler's work)."""
    exactly: dict[str, Any] = {"deviceClassName": DRIVER}
    if tolerations:
        exactly["tolerations"] = tolerations
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }
    await client.create(RESOURCE_CLAIMS, claim, namespace=NS)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "nodeName": "n1",
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
        },
    }
    created = msgspec.json.decode(await client.create(PODS, pod, namespace=NS), type=Pod)
    allocation = {
        "devices": {
            "results": [{"request": "gpu", "driver": DRIVER, "pool": "n1", "device": f"gpu-{gpu}"}]
        }
    }
    reserved = [{"resource": "pods", "name": name, "uid": created.metadata.uid}]
    await client.patch(
        RESOURCE_CLAIMS, name, {"status": {"allocation": allocation, "reservedFor": reserved}},
        namespace=NS, subresource="status",
    )  # fmt: skip


def rule_body(device: str, taint: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": f"fault-{device}"},
        "spec": {
            "deviceSelector": {"driver": DRIVER, "pool": "n1", "device": device},
            "taint": taint,
        },
    }


async def pods(client: KubeClient) -> set[str]:
    raw = await client.list(PODS, namespace=NS)
    items = msgspec.json.decode(raw, type=dict[str, Any])["items"]
    return {
        item["metadata"]["name"] for item in items if not item["metadata"].get("deletionTimestamp")
    }


async def condition(client: KubeClient, name: str) -> dict[str, Any] | None:
    rule = msgspec.json.decode(await client.get(DEVICE_TAINT_RULES, name), type=DeviceTaintRule)
    return next(
        (c for c in rule.status.get("conditions", ()) if c["type"] == "EvictionInProgress"), None
    )


async def test_a_rules_noexecute_taint_evicts_only_the_pods_of_that_device(
    kube_client: KubeClient, controllers: ControllerManager
) -> None:
    await gpu_slice(kube_client)
    await pod_on_gpu(kube_client, "on-gpu-2", 2)
    await pod_on_gpu(kube_client, "on-gpu-1", 1)
    tolerate = [{"key": "cdo.dev/gpu-fault", "operator": "Exists", "effect": "NoExecute"}]
    await pod_on_gpu(kube_client, "tolerant", 2, tolerations=tolerate)
    await wait_for(lambda: pods(kube_client), what="pods listed")
    await kube_client.create(DEVICE_TAINT_RULES, rule_body("gpu-2", FAULT))

    async def evicted() -> bool:
        return await pods(kube_client) == {"on-gpu-1", "tolerant"}

    await wait_for(evicted, what="only the untolerating pod of gpu-2 deleted")

    async def reported() -> dict[str, Any] | None:
        found = await condition(kube_client, "fault-gpu-2")
        return found if found is not None and found["status"] == "False" else None

    done = await wait_for(reported, what="EvictionInProgress False once done")
    assert done["message"] == "0 pods need to be evicted, 1 pods evicted"
    assert await pods(kube_client) == {"on-gpu-1", "tolerant"}


async def test_toleration_seconds_delay_the_eviction(
    kube_client: KubeClient, controllers: ControllerManager
) -> None:
    await gpu_slice(kube_client)
    tolerate = [
        {
            "key": "cdo.dev/gpu-fault",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 1,
        }
    ]
    await pod_on_gpu(kube_client, "patient", 0, tolerations=tolerate)
    await kube_client.create(DEVICE_TAINT_RULES, rule_body("gpu-0", FAULT))

    async def pending() -> dict[str, Any] | None:
        found = await condition(kube_client, "fault-gpu-0")
        return found if found is not None and found["status"] == "True" else None

    seen = await wait_for(pending, what="EvictionInProgress True while the toleration lasts")
    assert seen["message"].startswith("1 pods need to be evicted")
    assert "patient" in await pods(kube_client)

    async def gone() -> bool:
        return "patient" not in await pods(kube_client)

    await wait_for(gone, timeout=10, what="deleted once tolerationSeconds ran out")


async def test_a_slice_taint_evicts_and_none_does_not(
    kube_client: KubeClient, controllers: ControllerManager
) -> None:
    await gpu_slice(kube_client)
    await pod_on_gpu(kube_client, "a", 0)
    await pod_on_gpu(kube_client, "b", 3)
    await kube_client.create(
        DEVICE_TAINT_RULES, rule_body("gpu-3", {"key": "example.com/x", "effect": "None"})
    )
    await kube_client.patch(
        RESOURCE_SLICES,
        "n1-gpus",
        {
            "spec": {
                "devices": [
                    {"name": "gpu-0", "taints": [FAULT]},
                    *({"name": f"gpu-{i}"} for i in (1, 2, 3)),
                ]
            }
        },
    )

    async def only_b() -> bool:
        return await pods(kube_client) == {"b"}

    await wait_for(only_b, what="the pod on the slice-tainted device deleted")
    none = await wait_for(
        lambda: condition(kube_client, "fault-gpu-3"), what="condition on effect None"
    )
    assert none["status"] == "False"


@pytest.mark.parametrize(
    ("emulator_config", "device_taints"), [pytest.param(*at_release("1.35"), id="1.35")]
)
async def test_at_1_35_the_controllers_sync_and_no_eviction_runs(
    controllers: ControllerManager,
) -> None:
    # Synced (the fixture waited) without watching DeviceTaintRules, which 1.35 does not serve;
    # kube-controller-manager starts no device taint eviction while DRADeviceTaints is off.
    assert "device-taint-eviction" not in controllers.loop_names
    assert "sim-deployment" in controllers.loop_names


ALPHA_RULES = msgspec.structs.replace(DEVICE_TAINT_RULES, version="v1alpha3")


@pytest.mark.parametrize(
    ("emulator_config", "device_taints"),
    [pytest.param(*rules_opted_in("1.34"), id="1.34")],
)
async def test_at_1_34_an_alpha_rule_evicts_and_has_no_status(
    kube_client: KubeClient, controllers: ControllerManager
) -> None:
    assert "device-taint-rules" not in controllers.loop_names  # no status to keep
    assert "device-taint-eviction" in controllers.loop_names
    await gpu_slice(kube_client)
    await pod_on_gpu(kube_client, "on-gpu-2", 2)
    await pod_on_gpu(kube_client, "on-gpu-1", 1)
    body = {**rule_body("gpu-2", FAULT), "apiVersion": ALPHA_RULES.api_version}
    await kube_client.create(ALPHA_RULES, body)

    async def evicted() -> bool:
        return await pods(kube_client) == {"on-gpu-1"}

    await wait_for(evicted, what="the pod of gpu-2 deleted for the alpha rule")
    stored = msgspec.json.decode(await kube_client.get(ALPHA_RULES, "fault-gpu-2"))
    assert "status" not in stored
