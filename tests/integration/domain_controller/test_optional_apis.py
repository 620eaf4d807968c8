"""A domain whose pods use DRA GPUs says what a fault of one GPU takes: its whole node on
Kubernetes 1.36 (even with DeviceTaintRule's v1beta2 turned on: cdo reads v1), that GPU alone
once the server serves the API at v1 (no restart)."""

from __future__ import annotations

import pytest

from shared.kube.resources import PODS, RESOURCE_CLAIM_TEMPLATES
from sim.kubeapi import KubeServer, ServerConfig
from sim.kubeapi.kinds import register_builtins
from sim.kubeapi.releases import Release
from sim.kubeapi.storage.resources import Registry
from tests.support.wait import wait_for

from .cluster import NAMESPACE, Cluster
from .conftest import ControllerFactory

RULES = ("resource.k8s.io", "v1", "devicetaintrules")


@pytest.fixture
def emulator_config() -> ServerConfig:
    # 1.36 serves DeviceTaintRule only as v1beta2, and only when asked to: cdo reads v1.
    return ServerConfig(
        bookmark_interval_s=0.5,
        kubernetes_version="1.36",
        feature_gates={"DRADeviceTaintRules": True},
        runtime_config={"resource.k8s.io/v1beta2": True},
    )


async def create_gpu_pod(cluster: Cluster, name: str, channel_template: str) -> None:
    """A pod with the domain's channel claim and a claim of two GPUs of NVIDIA's DRA driver."""
    await cluster.client.create(
        RESOURCE_CLAIM_TEMPLATES,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "two-gpus", "namespace": NAMESPACE},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "gpus",
                                "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2},
                            }
                        ]
                    }
                }
            },
        },
        namespace=NAMESPACE,
    )
    await cluster.client.create(
        PODS,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {
                "containers": [{"name": "main", "image": "trainer"}],
                "resourceClaims": [
                    {"name": "channel", "resourceClaimTemplateName": channel_template},
                    {"name": "gpus", "resourceClaimTemplateName": "two-gpus"},
                ],
            },
        },
        namespace=NAMESPACE,
    )


async def test_per_gpu_faults_follows_whether_device_taint_rules_are_served(
    emulator: KubeServer, start_controller: ControllerFactory, cluster: Cluster
) -> None:
    registry = emulator.api.registry
    assert registry.get(*RULES) is None
    assert registry.get("resource.k8s.io", "v1beta2", "devicetaintrules") is not None
    newest = Registry()
    register_builtins(newest, Release.of("1.37"))
    kept = newest.get(*RULES)
    assert kept is not None
    controller = start_controller(CDO_DOMAIN_CONTROLLER_INFORMER_OPTIONAL_API_RECHECK_S="0.3")
    await controller.wait_ready()
    await cluster.create_domain("dra", "dra-rct")
    await cluster.create_domain("plugin", "plugin-rct")
    await create_gpu_pod(cluster, "dra-0", "dra-rct")
    await cluster.create_pod("plugin-0", "plugin-rct")

    async def per_gpu(name: str) -> str | None:
        condition = await cluster.condition(name, "PerGpuFaults")
        return None if condition is None else f"{condition.status}/{condition.reason}"

    async def said(name: str, expected: str) -> bool:
        return await per_gpu(name) == expected

    await wait_for(lambda: said("dra", "False/DeviceTaintRuleNotServed"), what="the domain says so")
    await controller.wait_idle()
    assert await per_gpu("plugin") is None  # device-plugin GPUs: nothing changes for them
    assert (
        'cdo_optional_api_served{api="devicetaintrules.resource.k8s.io/v1"} 0.0'
        in await controller.metrics()
    )

    registry.add(kept)  # served at v1, as 1.37 serves it
    await wait_for(lambda: said("dra", "True/DeviceTaintRules"), what="the API used, no restart")
    assert controller.process.returncode is None
