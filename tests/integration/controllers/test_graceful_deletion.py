"""With graceful pod deletion (a kubelet finishes deleting bound pods), terminating pods count
as gone for replicas but Recreate waits until they are really gone."""

from __future__ import annotations

import pytest

from shared.kube.resources import PODS
from sim.controllers.pods import is_terminating
from sim.kubeapi import ServerConfig
from tests.integration.controllers.cluster import NAMESPACE, Cluster
from tests.integration.controllers.test_deployment import converged
from tests.support.wait import wait_for

pytestmark = pytest.mark.usefixtures("controllers")


@pytest.fixture
def emulator_config() -> ServerConfig:
    return ServerConfig(bookmark_interval_s=0.2, pod_graceful_deletion=True)


async def test_a_terminating_pod_is_replaced_at_once(cluster: Cluster) -> None:
    deployment = await cluster.create_deployment("web", replicas=2)
    await wait_for(lambda: converged(cluster, "web", 2), what="2 pods")
    [rs] = await cluster.replica_sets_of(deployment)
    victim, _ = await cluster.pods_of(rs)
    await cluster.bind(victim, "node-1")
    await cluster.set_phase(victim, "Running", ready=True)
    await cluster.delete_pod(victim)

    async def replaced() -> bool:
        pods = await cluster.pods_of(rs)
        leaving = [p for p in pods if is_terminating(p)]
        return len(pods) == 3 and [p.metadata.name for p in leaving] == [victim.metadata.name]

    await wait_for(replaced, what="a replacement next to the terminating pod")
    await wait_for(lambda: converged(cluster, "web", 2), what="2 active pods")


async def test_recreate_waits_for_terminating_pods(cluster: Cluster) -> None:
    deployment = await cluster.create_deployment("web", replicas=2, strategy={"type": "Recreate"})
    await wait_for(lambda: converged(cluster, "web", 2), what="2 pods")
    [first] = await cluster.replica_sets_of(deployment)
    for pod in await cluster.pods_of(first):
        await cluster.bind(pod, "node-1")
        await cluster.set_phase(pod, "Running", ready=True)
    await cluster.set_image("web", "app:2")

    async def old_terminating() -> bool:
        pods = await cluster.pods_of(first)
        return len(pods) == 2 and all(is_terminating(p) for p in pods)

    await wait_for(old_terminating, what="old pods terminating")
    assert len(await cluster.replica_sets_of(deployment)) == 1  # the new one waits
    for pod in await cluster.pods_of(first):  # the kubelet finishes
        await cluster.client.request(
            "DELETE",
            PODS.path(namespace=NAMESPACE, name=pod.metadata.name),
            body={"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0},
        )
    await wait_for(lambda: converged(cluster, "web", 2), what="2 new pods")
    assert len(await cluster.replica_sets_of(deployment)) == 2
