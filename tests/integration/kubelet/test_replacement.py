"""The whole loop: a Deployment's pod on a node that loses power is replaced on another node.

Real parts throughout: the API emulator over HTTP, the simulated scheduler (DRA allocation from
ResourceSlices), the workload and resource-claim controllers, two kubelets with a DRA plugin
each over gRPC, and the node lifecycle controller.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import msgspec
import pytest

from shared.kube.client import KubeClient
from shared.kube.resources import (
    DEPLOYMENTS,
    DEVICE_CLASSES,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_SLICES,
)
from sim.controllers import ControllerManager
from sim.kubelet import CDI_DEVICES_ANNOTATION, LifecycleSettings, NodeLifecycleController
from sim.kubelet.models import Pod
from sim.scheduler import Scheduler, SchedulerSettings
from sim.topology import Cluster
from tests.integration.kubelet.conftest import FAST_INFORMERS, KubeletFactory
from tests.integration.kubelet.helpers import DRIVER, NAMESPACE, running
from tests.support.wait import wait_for

pytestmark = pytest.mark.timeout(60)


class _PodList(msgspec.Struct, frozen=True):
    items: list[Pod]


async def _pods(client: KubeClient) -> list[Pod]:
    raw = await client.list(PODS, namespace=NAMESPACE, label_selector="app=trainer")
    return msgspec.json.decode(raw, type=_PodList).items


async def _publish_devices(client: KubeClient, cluster: Cluster) -> None:
    """What the IMEX agent and the domain controller would publish: slices and a class."""
    for node in cluster.nodes:
        await client.create(
            RESOURCE_SLICES,
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{node.name}-channels"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": node.name,
                    "pool": {"name": node.name, "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": "channel-0"}, {"name": "channel-1"}],
                },
            },
        )
    await client.create(
        DEVICE_CLASSES,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "channels.cdo.test"},
            "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]},
        },
    )
    await client.create(
        RESOURCE_CLAIM_TEMPLATES,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "channel", "namespace": NAMESPACE},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {"name": "channel", "exactly": {"deviceClassName": "channels.cdo.test"}}
                        ]
                    }
                }
            },
        },
        namespace=NAMESPACE,
    )


def _deployment() -> dict[str, object]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "trainer", "namespace": NAMESPACE},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "trainer"}},
            "template": {
                "metadata": {"labels": {"app": "trainer"}},
                "spec": {
                    "resourceClaims": [{"name": "channel", "resourceClaimTemplateName": "channel"}],
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.test/train:1",
                            "resources": {
                                "limits": {"nvidia.com/gpu": "1"},
                                "claims": [{"name": "channel"}],
                            },
                        }
                    ],
                },
            },
        },
    }


@pytest.fixture
async def control_plane(kube_client: KubeClient) -> AsyncIterator[None]:
    scheduler = Scheduler(
        kube_client,
        settings=SchedulerSettings(
            backoff_initial_s=0.1, backoff_max_s=0.5, informer=FAST_INFORMERS
        ),
    )
    lifecycle = NodeLifecycleController(
        client=kube_client,
        settings=LifecycleSettings(node_monitor_grace_s=1.0, default_toleration_s=1),
        informer_settings=FAST_INFORMERS,
    )
    async with (
        running(scheduler.run(), "scheduler"),
        running(lifecycle.run(), "node lifecycle"),
        ControllerManager(kube_client).running(),
    ):
        yield


@pytest.mark.usefixtures("control_plane")
async def test_pod_of_a_powered_off_node_is_replaced_on_another_node(
    kube_client: KubeClient, cluster: Cluster, kubelet_on: KubeletFactory
) -> None:
    await _publish_devices(kube_client, cluster)
    async with kubelet_on(0) as first, kubelet_on(1) as second:
        kubelets = {first.name: first, second.name: second}
        await kube_client.create(DEPLOYMENTS, _deployment(), namespace=NAMESPACE)

        async def one_running() -> Pod | None:
            live = [p for p in await _pods(kube_client) if p.status.phase == "Running"]
            return live[0] if len(live) == 1 else None

        original = await wait_for(one_running, timeout=20, what="deployment pod Running")
        assert json.loads(original.metadata.annotations[CDI_DEVICES_ANNOTATION])

        kubelets[original.spec.node_name].power_off()

        async def replaced() -> Pod | None:
            for pod in await _pods(kube_client):
                fresh = pod.metadata.uid != original.metadata.uid
                if fresh and pod.status.phase == "Running" and not pod.metadata.deletion_timestamp:
                    return pod
            return None

        replacement = await wait_for(replaced, timeout=20, what="replacement Running")
        assert replacement.spec.node_name != original.spec.node_name
        assert json.loads(replacement.metadata.annotations[CDI_DEVICES_ANNOTATION])
