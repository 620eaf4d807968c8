"""The disruption controller against the emulator: budget status from pods and their
controllers' scale, kept current as pods come, go and get ready, and evictions through the
subresource spending exactly what the budget allows."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from shared.kube.errors import KubeApiError
from shared.kube.resources import POD_DISRUPTION_BUDGETS, PODS, STATEFUL_SETS
from sim.controllers.budgets import Budget
from tests.integration.controllers.cluster import NAMESPACE, Cluster, pod_template
from tests.support.wait import wait_for

pytestmark = pytest.mark.usefixtures("controllers")


async def create_budget(cluster: Cluster, name: str, spec: dict[str, Any]) -> None:
    body = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name}}
    await cluster.client.create(POD_DISRUPTION_BUDGETS, {**body, "spec": spec}, namespace=NAMESPACE)


async def budget(cluster: Cluster, name: str) -> Budget:
    raw = await cluster.client.get(POD_DISRUPTION_BUDGETS, name, namespace=NAMESPACE)
    return msgspec.json.decode(raw, type=Budget)


async def status_is(cluster: Cluster, name: str, **wanted: int) -> Budget | None:
    """The budget once its status has observed its generation and has the ``wanted`` counts."""
    found = await budget(cluster, name)
    status = msgspec.to_builtins(found.status)
    current = found.status.observed_generation == found.metadata.generation
    return found if current and all(status.get(k) == v for k, v in wanted.items()) else None


async def evict(cluster: Cluster, pod: str) -> int:
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod}}
    try:
        await cluster.client.create(
            PODS, body, namespace=NAMESPACE, name=pod, subresource="eviction"
        )
    except KubeApiError as exc:
        return exc.code
    return 201


async def test_a_budget_follows_its_deployment_and_refuses_what_it_cannot_spare(
    cluster: Cluster,
) -> None:
    await cluster.create_deployment("web", replicas=3)
    await create_budget(
        cluster, "web", {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}
    )
    # No pod is ready yet: nothing may go.
    await wait_for(
        lambda: status_is(cluster, "web", expectedPods=3, currentHealthy=0, disruptionsAllowed=0),
        what="budget with 3 pods, none healthy",
    )

    await wait_for(lambda: _all_ready(cluster, 3), what="3 pods ready")
    found = await wait_for(
        lambda: status_is(cluster, "web", currentHealthy=3, desiredHealthy=2, disruptionsAllowed=1),
        what="one disruption allowed",
    )
    (condition,) = found.status.conditions
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "DisruptionAllowed",
        "True",
        "SufficientPods",
    )

    first, second = sorted(p.metadata.name for p in await cluster.pods())[:2]
    assert await evict(cluster, first) == 201
    assert await evict(cluster, second) == 429
    # The ReplicaSet replaces the evicted pod; once the new one is ready, one may go again.
    await wait_for(lambda: _all_ready(cluster, 3), what="the replacement ready")
    found = await wait_for(
        lambda: status_is(cluster, "web", currentHealthy=3, disruptionsAllowed=1),
        what="one disruption allowed again",
    )
    assert first not in found.status.disrupted_pods
    assert await evict(cluster, second) == 201


async def test_max_unavailable_counts_the_controllers_scale(cluster: Cluster) -> None:
    await cluster.create_deployment("api", replicas=4, template=pod_template(app="api"))
    await create_budget(
        cluster, "api", {"maxUnavailable": "50%", "selector": {"matchLabels": {"app": "api"}}}
    )
    await wait_for(lambda: _all_ready(cluster, 4), what="4 pods ready")
    await wait_for(
        lambda: status_is(cluster, "api", expectedPods=4, desiredHealthy=2, disruptionsAllowed=2),
        what="two disruptions allowed",
    )
    # Scaling the Deployment changes what is expected before any pod changes.
    await cluster.scale("api", 6)
    await wait_for(
        lambda: status_is(cluster, "api", expectedPods=6, desiredHealthy=3),
        what="6 pods expected",
    )


async def test_a_budget_whose_pods_have_no_scale_fails_to_sync(cluster: Cluster) -> None:
    await cluster.create_job("batch", parallelism=1, completions=1)
    await wait_for(lambda: _all_ready(cluster, 1), what="the Job's pod ready")
    selector = {"matchLabels": {"batch.kubernetes.io/job-name": "batch"}}
    await create_budget(cluster, "batch", {"maxUnavailable": 0, "selector": selector})
    found = await wait_for(
        lambda: status_is(cluster, "batch", disruptionsAllowed=0), what="status observed"
    )
    (condition,) = found.status.conditions
    assert (condition["status"], condition["reason"]) == ("False", "SyncFailed")
    assert condition["message"].startswith('found no controllers for pod "batch-')


async def test_a_statefulset_scale_is_read_through_its_subresource(cluster: Cluster) -> None:
    body = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db"},
        "spec": {
            "replicas": 5,
            "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": {
                "metadata": {"labels": {"app": "db"}},
                "spec": {"containers": [{"name": "main", "image": "img:1"}]},
            },
        },
    }
    raw = await cluster.client.create(STATEFUL_SETS, body, namespace=NAMESPACE)
    owner = msgspec.json.decode(raw)
    # No StatefulSet controller runs here: the test makes its pod, as that controller would.
    pod = {
        "metadata": {
            "name": "db-0",
            "labels": {"app": "db"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "StatefulSet",
                    "name": "db",
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {"containers": [{"name": "main", "image": "img:1"}]},
    }
    await cluster.client.create(PODS, pod, namespace=NAMESPACE)
    await create_budget(
        cluster, "db", {"minAvailable": "60%", "selector": {"matchLabels": {"app": "db"}}}
    )
    await wait_for(
        lambda: status_is(cluster, "db", expectedPods=5, desiredHealthy=3, currentHealthy=0),
        what="5 pods expected from the StatefulSet's scale",
    )


async def _all_ready(cluster: Cluster, count: int) -> bool:
    await cluster.run_pods()
    pods = [
        p
        for p in await cluster.pods()
        if p.metadata.deletion_timestamp is None and p.status.phase == "Running"
    ]
    return len(pods) == count and all(
        (c := p.condition("Ready")) is not None and c.status == "True" for p in pods
    )
