"""A controller killed mid-reconcile, watches that break, and API errors lose nothing."""

from __future__ import annotations

from shared.crds.names import DOMAIN_FINALIZER, DOMAIN_LABEL
from shared.kube.resources import RESOURCE_CLAIM_TEMPLATES
from sim.kubeapi import KubeServer
from tests.support.wait import wait_for

from .cluster import Cluster, MembershipLog
from .conftest import Controller, ControllerFactory


async def phase_is(cluster: Cluster, name: str, status: str) -> bool:
    domain = await cluster.domain(name)
    return domain is not None and domain.status.status == status


async def degraded(cluster: Cluster, name: str, value: str) -> bool:
    condition = await cluster.condition(name, "Degraded")
    return condition is not None and condition.status == value


async def test_sigkill_mid_reconcile_then_restart_converges(
    emulator: KubeServer,
    cluster: Cluster,
    start_controller: ControllerFactory,
    membership: MembershipLog,
) -> None:
    first = start_controller("dc-killed")
    await first.wait_ready()
    # Hold the controller inside its first reconcile: template creation hangs for a while.
    emulator.faults.set_latency(30.0, verbs=["create"], resource=RESOURCE_CLAIM_TEMPLATES.plural)
    domain = await cluster.create_domain("crash", "crash-rct")
    await wait_for(
        lambda: _has_finalizer(cluster, "crash"), what="finalizer added, template pending"
    )
    assert await first.counter("workqueue_unfinished_work_seconds") > 0  # mid-reconcile
    first.kill()
    emulator.faults.clear()

    await cluster.create_node("n1", address="10.0.0.1")
    await cluster.run_gang(domain, ["n1"])
    second = start_controller("dc-restarted")
    await second.wait_ready()
    await wait_for(lambda: phase_is(cluster, "crash", "Ready"), timeout=20, what="ready")

    current = await cluster.domain("crash")
    assert current is not None
    assert current.metadata.finalizers.count(DOMAIN_FINALIZER) == 1
    template = await cluster.template("crash-rct")
    assert template is not None and template.metadata.labels[DOMAIN_LABEL] == "crash"
    await wait_for(lambda: membership.phases("crash")[-1:] == ["Ready"], what="ready event")
    await second.wait_idle()
    phases = membership.phases("crash")
    assert phases.count("Ready") == 1, phases


async def test_410_dropped_watches_and_api_errors_lose_no_update(
    emulator: KubeServer,
    cluster: Cluster,
    controller: Controller,
    membership: MembershipLog,
) -> None:
    domain = await cluster.create_domain("hardy", "hardy-rct")
    await wait_for(lambda: membership.of("hardy"), what="first event")
    await cluster.create_node("n1", address="10.0.0.1")
    await cluster.create_node("n2", address="10.0.0.2")

    # A dropped watch: the informers resume from their last resourceVersion.
    emulator.faults.drop_watches()
    await cluster.run_gang(domain, ["n1", "n2"])
    await wait_for(lambda: phase_is(cluster, "hardy", "Ready"), what="ready after a dropped watch")

    # History compacted and watches ended: resuming gets 410 and the informers list again,
    # reporting what changed meanwhile.
    lists_before = await controller.counter("cdo_informer_lists_total", reason="expired")
    emulator.compact()
    emulator.faults.expire_next_watch(12)
    emulator.faults.drop_watches()
    await cluster.taint("n2", fault=True)
    await wait_for(lambda: degraded(cluster, "hardy", "True"), what="degraded after a 410")
    assert await controller.counter("cdo_informer_lists_total", reason="expired") > lists_before

    # Writes fail for a while: 409, 429 with Retry-After, 500. The change still lands.
    for code in (409, 429, 500):
        emulator.faults.fail_next(2, code=code, verbs=["patch"], resource="computedomains")
    await cluster.taint("n2", fault=False)
    await wait_for(
        lambda: degraded(cluster, "hardy", "False"), timeout=20, what="recovered despite errors"
    )
    await wait_for(lambda: phase_is(cluster, "hardy", "Ready"), what="ready again")
    errors = await controller.counter(
        "controller_runtime_reconcile_total", controller="computedomains", result="error"
    )
    assert errors >= 3
    await wait_for(
        lambda: membership.phases("hardy")[-3:] == ["Ready", "Degraded", "Ready"],
        what="events of every change",
    )


async def _has_finalizer(cluster: Cluster, name: str) -> bool:
    domain = await cluster.domain(name)
    return domain is not None and DOMAIN_FINALIZER in domain.metadata.finalizers
