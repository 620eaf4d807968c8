"""Power a node off and on: the lifecycle controller marks it, taints it, evicts its pods."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from shared.kube.client import KubeClient
from sim.kubelet import LifecycleSettings, NodeLifecycleController
from sim.kubelet.models import Node, Pod
from sim.topology import Cluster
from tests.integration.kubelet.conftest import FAST_INFORMERS, KubeletFactory
from tests.integration.kubelet.helpers import (
    RecordingDriver,
    create_allocated_claim,
    get_node,
    get_pod,
    run_pod,
    running,
)
from tests.support.wait import wait_for

UNREACHABLE = "node.kubernetes.io/unreachable"


@pytest.fixture
async def lifecycle(kube_client: KubeClient) -> AsyncIterator[NodeLifecycleController]:
    controller = NodeLifecycleController(
        client=kube_client,
        settings=LifecycleSettings(node_monitor_grace_s=1.0, default_toleration_s=1),
        informer_settings=FAST_INFORMERS,
    )
    async with running(controller.run(), "node lifecycle"):
        yield controller


def _ready(node: Node | None) -> str:
    condition = node.condition("Ready") if node is not None else None
    return condition.status if condition is not None else ""


def _lifecycle_taints(node: Node) -> set[tuple[str, str]]:
    return {(t.key, t.effect) for t in node.spec.taints if t.key.startswith("node.kubernetes.io/")}


async def _running(client: KubeClient, name: str) -> Pod | None:
    pod = await get_pod(client, name)
    return pod if pod is not None and pod.status.phase == "Running" else None


async def test_powered_off_node_goes_not_ready_and_loses_its_pods_until_powered_on(
    kube_client: KubeClient,
    cluster: Cluster,
    driver: RecordingDriver,
    kubelet_on: KubeletFactory,
    lifecycle: NodeLifecycleController,
) -> None:
    off, on = cluster.nodes[0].name, cluster.nodes[1].name
    async with kubelet_on(0) as kubelet, kubelet_on(1):
        claim = await create_allocated_claim(kube_client, "victim-channel", node=off)
        await run_pod(kube_client, "victim", node=off, claim="victim-channel")
        await run_pod(kube_client, "bystander", node=on)
        await wait_for(lambda: _running(kube_client, "victim"), what="victim Running")
        await wait_for(lambda: _running(kube_client, "bystander"), what="bystander Running")

        kubelet.power_off()

        async def unknown() -> Node | None:
            node = await get_node(kube_client, off)
            return node if _ready(node) == "Unknown" else None

        node = await wait_for(unknown, timeout=10, what="node Ready=Unknown")
        ready = node.condition("Ready")
        assert ready is not None and ready.reason == "NodeStatusUnknown"
        assert not kubelet.active

        async def tainted() -> Node | None:
            node = await get_node(kube_client, off)
            wanted = {(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")}
            return node if node is not None and _lifecycle_taints(node) == wanted else None

        node = await wait_for(tainted, what="unreachable taints")
        no_execute = next(t for t in node.spec.taints if t.effect == "NoExecute")
        assert no_execute.time_added is not None

        # After the default toleration (1 s here) the pod is evicted: marked and deleted
        # gracefully, and left Terminating because no kubelet runs there to finish it.
        async def evicted() -> Pod | None:
            pod = await get_pod(kube_client, "victim")
            return pod if pod is not None and pod.metadata.deletion_timestamp else None

        victim = await wait_for(evicted, timeout=10, what="victim evicted")
        target = victim.condition("DisruptionTarget")
        assert target is not None and target.reason == "DeletionByTaintManager"
        ready_condition = victim.condition("Ready")
        assert ready_condition is not None and ready_condition.status == "False"
        assert claim.metadata.uid in driver.prepared  # nothing ran on the node to unprepare

        # The other node was never touched.
        other = await get_node(kube_client, on)
        assert _ready(other) == "True"
        assert other is not None and not _lifecycle_taints(other)
        assert await _running(kube_client, "bystander") is not None

        kubelet.power_on()

        async def back() -> Node | None:
            node = await get_node(kube_client, off)
            ok = node is not None and _ready(node) == "True" and not _lifecycle_taints(node)
            return node if ok else None

        await wait_for(back, timeout=10, what="node Ready again, taints removed")

        async def victim_gone() -> bool:
            return await get_pod(kube_client, "victim") is None

        await wait_for(victim_gone, what="kubelet finished the deletion")
        assert claim.metadata.uid in driver.unprepared
        assert kubelet.prepared_claims == {}


async def test_pods_that_tolerate_unreachable_stay_and_become_ready_again(
    kube_client: KubeClient,
    cluster: Cluster,
    kubelet_on: KubeletFactory,
    lifecycle: NodeLifecycleController,
) -> None:
    name = cluster.nodes[0].name
    forever = [{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute"}]
    async with kubelet_on(0) as kubelet:
        await run_pod(kube_client, "sticky", node=name, tolerations=forever)
        await wait_for(lambda: _running(kube_client, "sticky"), what="Running")

        kubelet.power_off()

        async def not_ready() -> Pod | None:
            pod = await get_pod(kube_client, "sticky")
            condition = pod.condition("Ready") if pod is not None else None
            return pod if condition is not None and condition.status == "False" else None

        pod = await wait_for(not_ready, timeout=10, what="pod marked not ready")
        condition = pod.condition("Ready")
        assert condition is not None and condition.reason == "NodeNotReady"
        assert pod.metadata.deletion_timestamp is None

        kubelet.power_on()

        async def ready_again() -> Pod | None:
            pod = await _running(kube_client, "sticky")
            condition = pod.condition("Ready") if pod is not None else None
            return pod if condition is not None and condition.status == "True" else None

        pod = await wait_for(ready_again, timeout=10, what="pod Ready again")
        assert pod.metadata.deletion_timestamp is None
