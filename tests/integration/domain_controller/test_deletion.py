"""Deleting a domain: it waits for its pods and its placement, then releases everything."""

from __future__ import annotations

import asyncio

from shared.crds import COMPUTE_DOMAINS
from shared.crds.names import DOMAIN_FINALIZER, DOMAIN_LABEL, DOMAIN_UID_LABEL
from shared.kube.resources import RESOURCE_CLAIM_TEMPLATES
from tests.support.wait import wait_for

from .cluster import NAMESPACE, Cluster, MembershipLog
from .conftest import Controller, ControllerFactory


async def deleting_reason(cluster: Cluster, name: str) -> str:
    condition = await cluster.condition(name, "Deleting")
    return "" if condition is None else condition.reason


async def test_deletion_waits_for_pods_and_placement_then_releases_everything(
    cluster: Cluster, controller: Controller, membership: MembershipLog
) -> None:
    domain = await cluster.create_domain("job", "job-rct")
    await wait_for(lambda: cluster.template("job-rct"), what="template")
    await cluster.create_node("n1", address="10.0.0.1")
    await cluster.run_gang(domain, ["n1"], per_node=2)
    await wait_for(lambda: "Ready" in membership.phases("job"), what="ready")

    await cluster.delete_domain("job")
    await wait_for(
        lambda: _reason(cluster, "job", "WaitingForPods"), what="deletion waits for pods"
    )
    condition = await cluster.condition("job", "Deleting")
    assert condition is not None
    assert condition.message == "2 pods still use the domain's claims: job-n1-0, job-n1-1"
    await controller.wait_idle()
    stuck = await cluster.domain("job")
    assert stuck is not None and DOMAIN_FINALIZER in stuck.metadata.finalizers
    assert await cluster.template("job-rct") is not None
    await wait_for(lambda: membership.phases("job")[-1:] == ["Deleting"], what="deleting event")

    await cluster.set_phase("job-n1-0", "Succeeded")  # a finished pod no longer counts
    await cluster.delete_pod("job-n1-1")
    await wait_for(
        lambda: _reason(cluster, "job", "WaitingForPlacementRelease"),
        what="deletion waits for the allocator",
    )
    assert await cluster.domain("job") is not None

    await cluster.release("job")  # what the allocator does once it has freed nodes and channel
    await wait_for(lambda: _gone(cluster, "job"), what="domain gone")
    assert await cluster.template("job-rct") is None
    await wait_for(lambda: membership.phases("job")[-1:] == ["Deleted"], what="final event")
    final = membership.of("job")[-1]
    assert (final.phase, final.members, final.uid) == ("Deleted", (), domain.metadata.uid)
    assert membership.phases("job").count("Deleted") == 1
    snapshot = await wait_for(
        lambda: _snapshot_phase(membership, "job", "Deleted"), what="final snapshot"
    )
    assert snapshot


async def test_a_domain_never_placed_goes_at_once(
    cluster: Cluster, controller: Controller, membership: MembershipLog
) -> None:
    await cluster.create_domain("short", "short-rct")
    await wait_for(lambda: cluster.template("short-rct"), what="template")
    await cluster.delete_domain("short")
    await wait_for(lambda: _gone(cluster, "short"), what="domain gone")
    assert await cluster.template("short-rct") is None
    await wait_for(lambda: membership.phases("short")[-1:] == ["Deleted"], what="final event")


async def test_orphans_are_collected_at_start(
    cluster: Cluster, start_controller: ControllerFactory, membership: MembershipLog
) -> None:
    first = start_controller("dc-first")
    await first.wait_ready()
    await cluster.create_domain("lost", "lost-rct")
    await wait_for(lambda: membership.of("lost"), what="first event")
    await first.wait_idle()
    await _stop(first)

    # While no controller runs: the finalizer is removed by hand and the domain deleted (so no
    # final event), and a template of a long-gone domain turns up.
    await cluster.client.patch(
        COMPUTE_DOMAINS, "lost", {"metadata": {"finalizers": None}}, namespace=NAMESPACE
    )
    await cluster.delete_domain("lost")
    await cluster.client.create(
        RESOURCE_CLAIM_TEMPLATES,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {
                "name": "ghost-rct",
                "namespace": NAMESPACE,
                "labels": {DOMAIN_LABEL: "ghost", DOMAIN_UID_LABEL: "0000-gone"},
            },
            "spec": {"spec": {"devices": {"requests": []}}},
        },
        namespace=NAMESPACE,
    )

    second = start_controller("dc-second")
    await second.wait_ready()
    await wait_for(lambda: _template_gone(cluster, "ghost-rct"), what="orphan template deleted")
    await wait_for(lambda: membership.phases("lost")[-1:] == ["Deleted"], what="final event")
    # The template of "lost" had an owner reference: the garbage collector took it.
    await wait_for(lambda: _template_gone(cluster, "lost-rct"), what="lost template collected")


async def _reason(cluster: Cluster, name: str, reason: str) -> bool:
    return await deleting_reason(cluster, name) == reason


async def _gone(cluster: Cluster, name: str) -> bool:
    return await cluster.domain(name) is None


async def _template_gone(cluster: Cluster, name: str) -> bool:
    return await cluster.template(name) is None


async def _snapshot_phase(membership: MembershipLog, name: str, phase: str) -> bool:
    snapshot = await membership.snapshot(name)
    return snapshot is not None and snapshot.phase == phase


async def _stop(controller: Controller) -> None:
    await asyncio.to_thread(controller.stop)
