"""Where the API server removes bound pods at once, the kubelet still unprepares their claims."""

from __future__ import annotations

import pytest

from shared.kube.client import KubeClient
from shared.kube.resources import PODS
from sim.kubeapi import ServerConfig
from sim.topology import Cluster
from tests.integration.kubelet.conftest import KubeletFactory
from tests.integration.kubelet.helpers import (
    NAMESPACE,
    RecordingDriver,
    create_allocated_claim,
    get_pod,
    run_pod,
)
from tests.support.wait import wait_for


@pytest.fixture
def emulator_config() -> ServerConfig:
    return ServerConfig(bookmark_interval_s=0.5, pod_graceful_deletion=False)


async def test_pod_removed_at_once_is_unprepared(
    kube_client: KubeClient, cluster: Cluster, driver: RecordingDriver, kubelet_on: KubeletFactory
) -> None:
    node = cluster.nodes[0].name
    async with kubelet_on(0) as kubelet:
        claim = await create_allocated_claim(kube_client, "quick-channel", node=node)
        await run_pod(kube_client, "quick", node=node, claim="quick-channel")

        async def running() -> bool:
            pod = await get_pod(kube_client, "quick")
            return pod is not None and pod.status.phase == "Running"

        await wait_for(running, what="Running")
        await kube_client.delete(PODS, "quick", namespace=NAMESPACE)
        assert await get_pod(kube_client, "quick") is None

        await wait_for(lambda: claim.metadata.uid in driver.unprepared, what="unprepared")
        assert kubelet.prepared_claims == {}
