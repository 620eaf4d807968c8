"""Deployments and ReplicaSets against the emulator: pods made, scaled, replaced, rolled."""

from __future__ import annotations

import pytest

from sim.controllers import ControllerManager
from sim.controllers.objects import POD_TEMPLATE_HASH_LABEL, REVISION_ANNOTATION, condition
from sim.controllers.pods import is_active
from tests.integration.controllers.cluster import Cluster, pod_template
from tests.support.wait import wait_for

pytestmark = pytest.mark.usefixtures("controllers")


async def converged(cluster: Cluster, name: str, replicas: int) -> bool:
    """One ReplicaSet with ``replicas`` active pods, and the Deployment's status says so."""
    deployment = await cluster.deployment(name)
    replica_sets = [rs for rs in await cluster.replica_sets_of(deployment) if rs.spec.replicas]
    if len(replica_sets) > 1 or (replicas and not replica_sets):
        return False
    active = [p for rs in replica_sets for p in await cluster.active_pods_of(rs)]
    status = deployment.status
    return (
        len(active) == replicas
        and status.replicas == replicas
        and status.updated_replicas == replicas
        and status.observed_generation == deployment.metadata.generation
    )


async def test_a_deployment_makes_one_replica_set_and_its_pods(cluster: Cluster) -> None:
    deployment = await cluster.create_deployment("web", replicas=18)
    await wait_for(lambda: converged(cluster, "web", 18), what="18 pods")
    [rs] = await cluster.replica_sets_of(deployment)
    pod_hash = rs.metadata.labels[POD_TEMPLATE_HASH_LABEL]
    assert rs.metadata.name == f"web-{pod_hash}"
    assert rs.spec.selector["matchLabels"] == {"app": "web", POD_TEMPLATE_HASH_LABEL: pod_hash}
    assert rs.metadata.annotations[REVISION_ANNOTATION] == "1"
    [owner] = rs.metadata.owner_references
    assert (owner.kind, owner.uid, owner.controller) == (
        "Deployment",
        deployment.metadata.uid,
        True,
    )
    pods = await cluster.pods_of(rs)
    assert len(pods) == 18
    for pod in pods:
        assert pod.metadata.name.startswith(f"web-{pod_hash}-")
        assert pod.metadata.labels == {"app": "web", POD_TEMPLATE_HASH_LABEL: pod_hash}
        assert pod.metadata.owner_references[0].block_owner_deletion is True
    # Nothing is ready until a kubelet says so.
    progressing = condition((await cluster.deployment("web")).status.conditions, "Progressing")
    assert progressing is not None and progressing.reason == "ReplicaSetUpdated"

    await cluster.run_pods()

    async def available() -> bool:
        status = (await cluster.deployment("web")).status
        progressing = condition(status.conditions, "Progressing")
        ready = condition(status.conditions, "Available")
        return (
            status.ready_replicas == status.available_replicas == 18
            and ready is not None
            and ready.status == "True"
            and progressing is not None
            and progressing.reason == "NewReplicaSetAvailable"
        )

    await wait_for(available, what="an available deployment")
    rs_status = (await cluster.replica_sets_of(deployment))[0].status
    assert (rs_status.ready_replicas, rs_status.available_replicas) == (18, 18)


async def test_scaling_down_and_up_converges(cluster: Cluster) -> None:
    await cluster.create_deployment("web", replicas=18)
    await wait_for(lambda: converged(cluster, "web", 18), what="18 pods")
    await cluster.run_pods()
    await cluster.scale("web", 9)
    await wait_for(lambda: converged(cluster, "web", 9), what="9 pods")
    await cluster.scale("web", 18)
    await wait_for(lambda: converged(cluster, "web", 18), what="18 pods again")
    await cluster.scale("web", 0)
    await wait_for(lambda: converged(cluster, "web", 0), what="no pods")
    assert len(await cluster.replica_sets()) == 1


async def test_scale_down_removes_pending_pods_before_running_ones(cluster: Cluster) -> None:
    deployment = await cluster.create_deployment("web", replicas=4)
    await wait_for(lambda: converged(cluster, "web", 4), what="4 pods")
    [rs] = await cluster.replica_sets_of(deployment)
    pods = await cluster.pods_of(rs)
    keep = sorted(p.metadata.name for p in pods[:2])
    for pod in pods[:2]:
        await cluster.bind(pod, "node-1")
        await cluster.set_phase(pod, "Running", ready=True)
    await cluster.scale("web", 2)
    await wait_for(lambda: converged(cluster, "web", 2), what="2 pods")
    assert sorted(p.metadata.name for p in await cluster.pods_of(rs)) == keep


async def test_a_deleted_pod_is_replaced(cluster: Cluster) -> None:
    deployment = await cluster.create_deployment("web", replicas=3)
    await wait_for(lambda: converged(cluster, "web", 3), what="3 pods")
    [rs] = await cluster.replica_sets_of(deployment)
    victim = (await cluster.pods_of(rs))[0]
    await cluster.delete_pod(victim)

    async def replaced() -> bool:
        names = {p.metadata.name for p in await cluster.active_pods_of(rs)}
        return len(names) == 3 and victim.metadata.name not in names

    await wait_for(replaced, what="a replacement pod")


async def test_a_failed_pod_is_replaced_and_left_in_place(cluster: Cluster) -> None:
    deployment = await cluster.create_deployment("web", replicas=2)
    await wait_for(lambda: converged(cluster, "web", 2), what="2 pods")
    [rs] = await cluster.replica_sets_of(deployment)
    victim = (await cluster.pods_of(rs))[0]
    await cluster.set_phase(victim, "Failed")

    async def replaced() -> bool:
        pods = await cluster.pods_of(rs)
        return len(pods) == 3 and sum(1 for p in pods if is_active(p)) == 2

    await wait_for(replaced, what="a replacement for the failed pod")
    assert (await cluster.pod(victim.metadata.name)) is not None


async def test_a_template_change_rolls_to_a_new_replica_set(cluster: Cluster) -> None:
    deployment = await cluster.create_deployment("web", replicas=6)
    await wait_for(lambda: converged(cluster, "web", 6), what="6 pods")
    [first] = await cluster.replica_sets_of(deployment)
    await cluster.set_image("web", "app:2")
    most_pods = 0

    async def rolled() -> bool:
        nonlocal most_pods
        await cluster.run_pods()  # the kubelet's part: new pods become ready
        active = [p for p in await cluster.pods() if is_active(p)]
        most_pods = max(most_pods, len(active))
        return await converged(cluster, "web", 6)

    await wait_for(rolled, what="a finished rollout", interval=0.05)
    assert most_pods <= 6 + 2  # maxSurge 25% of 6, rounded up
    replica_sets = {rs.metadata.name: rs for rs in await cluster.replica_sets_of(deployment)}
    assert replica_sets[first.metadata.name].spec.replicas == 0
    [second] = [rs for name, rs in replica_sets.items() if name != first.metadata.name]
    assert second.metadata.annotations[REVISION_ANNOTATION] == "2"
    assert second.spec.template["spec"]["containers"][0]["image"] == "app:2"
    for pod in await cluster.active_pods_of(second):
        assert (
            pod.metadata.labels[POD_TEMPLATE_HASH_LABEL]
            == (second.metadata.labels[POD_TEMPLATE_HASH_LABEL])
        )
    assert await cluster.active_pods_of(first) == []

    # Back to the first template: its ReplicaSet is new again, with the next revision.
    await cluster.set_image("web", "app:1")
    await wait_for(rolled, what="a rollback", interval=0.05)
    again = {rs.metadata.name: rs for rs in await cluster.replica_sets_of(deployment)}
    assert again[first.metadata.name].spec.replicas == 6
    assert again[first.metadata.name].metadata.annotations[REVISION_ANNOTATION] == "3"
    assert again[second.metadata.name].spec.replicas == 0


async def test_recreate_replaces_all_pods_at_once(cluster: Cluster) -> None:
    deployment = await cluster.create_deployment("web", replicas=4, strategy={"type": "Recreate"})
    await wait_for(lambda: converged(cluster, "web", 4), what="4 pods")
    [first] = await cluster.replica_sets_of(deployment)
    await cluster.set_image("web", "app:2")
    await wait_for(lambda: converged(cluster, "web", 4), what="4 new pods")
    assert await cluster.pods_of(first) == []
    assert len(await cluster.replica_sets_of(deployment)) == 2


async def test_pods_use_claim_templates_through_the_deployment(
    cluster: Cluster, controllers: ControllerManager
) -> None:
    await cluster.create_claim_template("channel", labels={"cdo.dev/compute-domain": "dom"})
    claims = [{"name": "imex", "resourceClaimTemplateName": "channel"}]
    await cluster.create_deployment("web", replicas=3, template=pod_template(claims=claims))
    await wait_for(lambda: converged(cluster, "web", 3), what="3 pods")

    async def claimed() -> bool:
        pods = await cluster.pods()
        made = await cluster.claims()
        return len(made) == 3 and all(p.status.resource_claim_statuses for p in pods)

    await wait_for(claimed, what="one claim per pod")
