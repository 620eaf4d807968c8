"""Pods bound to a node: claims prepared by a real DRA plugin over gRPC, run, deleted, finished."""

from __future__ import annotations

import json

import msgspec

from shared.kube.client import KubeClient
from shared.kube.resources import EVENTS, PODS
from sim.kubelet import CDI_DEVICES_ANNOTATION, RUN_SECONDS_ANNOTATION
from sim.kubelet.models import Pod
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


class _Event(msgspec.Struct, frozen=True, rename="camel"):
    reason: str
    message: str
    type: str


class _EventList(msgspec.Struct, frozen=True):
    items: list[_Event]


async def _pod_in(client: KubeClient, name: str, phase: str) -> Pod | None:
    pod = await get_pod(client, name)
    return pod if pod is not None and pod.status.phase == phase else None


async def _events(client: KubeClient, pod: str) -> list[_Event]:
    raw = await client.list(
        EVENTS, namespace=NAMESPACE, field_selector=f"involvedObject.name={pod}"
    )
    return msgspec.json.decode(raw, type=_EventList).items


async def test_pod_with_a_claim_runs_with_the_plugins_cdi_ids(
    kube_client: KubeClient, cluster: Cluster, driver: RecordingDriver, kubelet_on: KubeletFactory
) -> None:
    node = cluster.nodes[0]
    async with kubelet_on(0):
        claim = await create_allocated_claim(kube_client, "train-0-channel", node=node.name)
        await run_pod(kube_client, "train-0", node=node.name, claim="train-0-channel")

        pod = await wait_for(lambda: _pod_in(kube_client, "train-0", "Running"), what="Running")

    assert claim.metadata.uid in driver.prepared
    assert json.loads(pod.metadata.annotations[CDI_DEVICES_ANNOTATION]) == [
        RecordingDriver.cdi_id("train-0-channel")
    ]
    for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready"):
        condition = pod.condition(kind)
        assert condition is not None and condition.status == "True", kind
    assert [(c.name, c.ready) for c in pod.status.container_statuses] == [("main", True)]
    assert pod.status.host_ip == node.address
    assert pod.status.start_time is not None


async def test_pod_without_claims_runs(
    kube_client: KubeClient, cluster: Cluster, kubelet_on: KubeletFactory
) -> None:
    async with kubelet_on(0):
        await run_pod(kube_client, "plain", node=cluster.nodes[0].name)
        pod = await wait_for(lambda: _pod_in(kube_client, "plain", "Running"), what="Running")
    assert json.loads(pod.metadata.annotations[CDI_DEVICES_ANNOTATION]) == []


async def test_failing_prepare_keeps_the_pod_pending_with_the_plugins_error(
    kube_client: KubeClient, cluster: Cluster, driver: RecordingDriver, kubelet_on: KubeletFactory
) -> None:
    node = cluster.nodes[0].name
    driver.refused["bad-channel"] = "channel pool exhausted on this node"
    async with kubelet_on(0):
        await create_allocated_claim(kube_client, "bad-channel", node=node)
        await run_pod(kube_client, "bad", node=node, claim="bad-channel")

        async def shows_error() -> Pod | None:
            pod = await get_pod(kube_client, "bad")
            condition = pod.condition("PodReadyToStartContainers") if pod else None
            if condition and "channel pool exhausted" in condition.message:
                return pod
            return None

        pod = await wait_for(shows_error, what="prepare error on the pod")
        assert pod.status.phase == "Pending"
        assert CDI_DEVICES_ANNOTATION not in pod.metadata.annotations
        condition = pod.condition("PodReadyToStartContainers")
        assert condition is not None
        assert (condition.status, condition.reason) == ("False", "FailedPrepareDynamicResources")
        ready = pod.condition("Ready")
        assert ready is not None and ready.status == "False"
        events = await wait_for(lambda: _events(kube_client, "bad"), what="Warning event")
        assert any(
            e.type == "Warning"
            and e.reason == "FailedPrepareDynamicResources"
            and "channel pool exhausted" in e.message
            for e in events
        )

        # The kubelet keeps retrying: once the plugin stops refusing, the pod runs.
        del driver.refused["bad-channel"]
        await wait_for(lambda: _pod_in(kube_client, "bad", "Running"), what="Running after fix")


async def test_pod_waits_for_its_driver_to_register(
    kube_client: KubeClient, cluster: Cluster, driver: RecordingDriver, kubelet_on: KubeletFactory
) -> None:
    node = cluster.nodes[0].name
    async with kubelet_on(0, plugin=False):
        await create_allocated_claim(kube_client, "early-channel", node=node)
        await run_pod(kube_client, "early", node=node, claim="early-channel")

        async def shows_unregistered() -> bool:
            pod = await get_pod(kube_client, "early")
            condition = pod.condition("PodReadyToStartContainers") if pod else None
            return condition is not None and "no registered kubelet plugin" in condition.message

        await wait_for(shows_unregistered, what="missing driver shown on the pod")
        pod = await get_pod(kube_client, "early")
        assert pod is not None and pod.status.phase == "Pending"


async def test_claim_not_reserved_for_the_pod_is_not_prepared(
    kube_client: KubeClient, cluster: Cluster, driver: RecordingDriver, kubelet_on: KubeletFactory
) -> None:
    node = cluster.nodes[0].name
    async with kubelet_on(0):
        claim = await create_allocated_claim(kube_client, "theirs", node=node)
        await run_pod(kube_client, "owner", node=node, claim="theirs")
        await wait_for(lambda: _pod_in(kube_client, "owner", "Running"), what="owner Running")
        # A second pod naming the same claim, which the scheduler never reserved for it.
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "intruder", "namespace": NAMESPACE},
            "spec": {
                "nodeName": node,
                "containers": [{"name": "main", "image": "registry.test/app:1"}],
                "resourceClaims": [{"name": "channel", "resourceClaimName": "theirs"}],
            },
        }
        await kube_client.create(PODS, body, namespace=NAMESPACE)

        async def refused() -> bool:
            pod = await get_pod(kube_client, "intruder")
            condition = pod.condition("PodReadyToStartContainers") if pod else None
            return condition is not None and "not reserved" in condition.message

        await wait_for(refused, what="intruder refused")
    assert list(driver.prepared) == [claim.metadata.uid]


async def test_deleting_a_pod_unprepares_its_claim_and_finishes_the_deletion(
    kube_client: KubeClient, cluster: Cluster, driver: RecordingDriver, kubelet_on: KubeletFactory
) -> None:
    node = cluster.nodes[0].name
    async with kubelet_on(0) as kubelet:
        claim = await create_allocated_claim(kube_client, "gone-channel", node=node)
        await run_pod(kube_client, "gone", node=node, claim="gone-channel")
        await wait_for(lambda: _pod_in(kube_client, "gone", "Running"), what="Running")
        assert claim.metadata.uid in kubelet.prepared_claims

        # Graceful deletion only marks the pod; the kubelet must finish it.
        await kube_client.delete(PODS, "gone", namespace=NAMESPACE)

        async def deleted() -> bool:
            return await get_pod(kube_client, "gone") is None

        await wait_for(deleted, what="pod deleted")
    assert claim.metadata.uid in driver.unprepared
    assert claim.metadata.uid not in driver.prepared
    assert kubelet.prepared_claims == {}


async def test_job_pod_completes_after_its_run_time_and_releases_its_claim(
    kube_client: KubeClient, cluster: Cluster, driver: RecordingDriver, kubelet_on: KubeletFactory
) -> None:
    node = cluster.nodes[0].name
    async with kubelet_on(0):
        claim = await create_allocated_claim(kube_client, "job-channel", node=node)
        await run_pod(
            kube_client,
            "job-0",
            node=node,
            claim="job-channel",
            restart_policy="Never",
            annotations={RUN_SECONDS_ANNOTATION: "0.3"},
        )
        pod = await wait_for(lambda: _pod_in(kube_client, "job-0", "Succeeded"), what="done")
    ready = pod.condition("Ready")
    assert ready is not None and (ready.status, ready.reason) == ("False", "PodCompleted")
    assert claim.metadata.uid in driver.unprepared
    assert not driver.prepared
