"""The controllers through the failures a real API server has: dropped and expired watches,
compacted history, server errors. No update may be lost and no pod made twice."""

from __future__ import annotations

import pytest

from sim.controllers import ControllerManager
from sim.kubeapi import KubeServer
from tests.integration.controllers.cluster import Cluster, pod_template
from tests.integration.controllers.test_deployment import converged
from tests.support.wait import wait_for

pytestmark = pytest.mark.usefixtures("controllers")


async def exactly(cluster: Cluster, replicas: int, manager: ControllerManager) -> None:
    """Converged, quiet, and not one pod more than wanted ever existed at the end."""
    await wait_for(lambda: converged(cluster, "web", replicas), what=f"{replicas} pods")
    await wait_for(lambda: manager.idle, what="quiet controllers")
    assert await converged(cluster, "web", replicas)


def relists(manager: ControllerManager, resource: str) -> float:
    value = manager.metrics.registry.get_sample_value(
        "cdo_informer_lists_total", {"resource": resource, "reason": "expired"}
    )
    return value or 0.0


def failed_reconciles(manager: ControllerManager, controller: str) -> float:
    value = manager.metrics.registry.get_sample_value(
        "controller_runtime_reconcile_total", {"controller": controller, "result": "error"}
    )
    return value or 0.0


async def test_server_errors_on_pod_creation_cost_no_extra_pods(
    cluster: Cluster, emulator: KubeServer, controllers: ControllerManager
) -> None:
    emulator.faults.fail_next(4, code=500, verbs=["create"], resource="pods")
    emulator.faults.fail_next(2, code=503, verbs=["patch"], resource="replicasets")
    await cluster.create_deployment("web", replicas=10)
    await exactly(cluster, 10, controllers)
    assert len(await cluster.pods()) == 10
    assert failed_reconciles(controllers, "sim-replicaset") >= 2


async def test_dropped_watches_lose_no_update(
    cluster: Cluster, emulator: KubeServer, controllers: ControllerManager
) -> None:
    await cluster.create_deployment("web", replicas=4)
    await exactly(cluster, 4, controllers)
    for replicas in (8, 2, 6):
        emulator.faults.drop_watches()
        await cluster.scale("web", replicas)
        emulator.faults.drop_watches()
        await exactly(cluster, replicas, controllers)


async def test_expired_watches_relist_and_catch_up(
    cluster: Cluster, emulator: KubeServer, controllers: ControllerManager
) -> None:
    await cluster.create_deployment("web", replicas=5)
    await exactly(cluster, 5, controllers)
    # Changes the controllers miss while their watches are gone, then 410 on the way back.
    emulator.faults.set_latency(0.3, verbs=["watch"])
    emulator.faults.drop_watches()
    [victim, *_] = await cluster.pods()
    await cluster.delete_pod(victim)
    await cluster.scale("web", 7)
    emulator.compact()
    emulator.faults.clear()
    await exactly(cluster, 7, controllers)
    assert relists(controllers, "pods") >= 1
    assert victim.metadata.name not in {p.metadata.name for p in await cluster.pods()}


async def test_injected_410s_on_every_watch_kind(
    cluster: Cluster, emulator: KubeServer, controllers: ControllerManager
) -> None:
    await cluster.create_claim_template("channel", labels={"cdo.dev/compute-domain": "dom"})
    claims = [{"name": "imex", "resourceClaimTemplateName": "channel"}]
    await cluster.create_deployment("web", replicas=3, template=pod_template(claims=claims))
    await exactly(cluster, 3, controllers)
    emulator.faults.expire_next_watch(12)
    emulator.faults.drop_watches()
    await cluster.scale("web", 5)
    await exactly(cluster, 5, controllers)

    async def claimed() -> bool:
        pods = await cluster.pods()
        return len(await cluster.claims()) == 5 and all(
            p.status.resource_claim_statuses for p in pods
        )

    await wait_for(claimed, what="a claim for every pod")
    for resource in ("pods", "replicasets", "deployments", "resourceclaims"):
        assert relists(controllers, resource) >= 1, resource
