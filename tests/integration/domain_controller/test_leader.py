"""Two replicas: only the leader writes; when it dies the other takes over within the lease; a
leader frozen past its renew deadline writes nothing once it wakes."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import msgspec

from shared.kube.leader import Lease
from shared.kube.resources import LEASES
from sim.kubeapi import KubeServer
from sim.kubeapi.storage.store import Event
from tests.support.apiproxy import recording_proxy
from tests.support.wait import wait_for

from .cluster import NAMESPACE, Cluster, MembershipLog
from .conftest import LEASE_DURATION_S, Controller, ControllerFactory

LEASE = "cdo-domain-controller"


async def holder(cluster: Cluster) -> str:
    raw = await cluster.client.get_or_none(LEASES, LEASE, namespace=NAMESPACE)
    return "" if raw is None else msgspec.json.decode(raw, type=Lease).spec.holder_identity


async def reconciles(controller: Controller) -> float:
    return await controller.counter(
        "controller_runtime_reconcile_total", controller="computedomains"
    )


async def test_only_the_leader_writes_and_a_standby_takes_over(
    cluster: Cluster, start_controller: ControllerFactory, membership: MembershipLog
) -> None:
    leader = start_controller("dc-a")
    await leader.wait_ready()
    await wait_for(lambda: _holder_is(cluster, "dc-a"), what="dc-a leads")
    standby = start_controller("dc-b")
    await standby.wait_ready()  # ready as a warm standby: its caches are synced

    await cluster.create_domain("one", "one-rct")
    await wait_for(lambda: cluster.template("one-rct"), what="template from the leader")
    await wait_for(lambda: membership.of("one"), what="event from the leader")
    await leader.wait_idle()
    assert await reconciles(leader) > 0
    assert await reconciles(standby) == 0
    assert await standby.counter("cdo_bus_messages_published_total") == 0
    assert {e.source for e in membership.of("one")} == {"cdo/domain-controller/dc-a"}

    killed_at = time.monotonic()
    leader.kill()
    await cluster.create_domain("two", "two-rct")
    await wait_for(
        lambda: cluster.template("two-rct"), timeout=LEASE_DURATION_S + 5, what="takeover"
    )
    took = time.monotonic() - killed_at
    assert took < LEASE_DURATION_S + 2, f"took {took:.1f}s for a {LEASE_DURATION_S}s lease"
    assert await holder(cluster) == "dc-b"
    assert await reconciles(standby) > 0
    await standby.wait_idle()
    # The new leader started from the snapshots: it published "one" no more than before.
    assert [e.phase for e in membership.of("one")] == ["Pending"], [
        (e.source, e.phase, e.reason, e.size, e.generation) for e in membership.of("one")
    ]
    (two,) = await wait_for(lambda: membership.of("two"), what="event from the new leader")
    assert two.source == "cdo/domain-controller/dc-b"


async def test_a_leader_that_loses_its_lease_exits(
    cluster: Cluster, start_controller: ControllerFactory
) -> None:
    leader = start_controller("dc-x")
    await leader.wait_ready()
    await wait_for(lambda: _holder_is(cluster, "dc-x"), what="dc-x leads")
    raw = await cluster.client.get(LEASES, LEASE, namespace=NAMESPACE)
    lease = msgspec.json.decode(raw, type=Lease)
    await cluster.client.patch(
        LEASES,
        LEASE,
        {
            "metadata": {"resourceVersion": lease.metadata.resource_version},
            "spec": {"holderIdentity": "intruder", "leaseDurationSeconds": 60},
        },
        namespace=NAMESPACE,
    )
    code = await asyncio.to_thread(leader.process.wait, 10)
    assert code == 1
    lost = [r for r in leader.process.log_records() if "LeadershipLost" in str(r)]
    assert lost, leader.process.stderr_text()[-2000:]


async def _holder_is(cluster: Cluster, identity: str) -> bool:
    return await holder(cluster) == identity


async def test_a_frozen_leader_writes_nothing_after_another_took_over(
    cluster: Cluster,
    start_controller: ControllerFactory,
    emulator: KubeServer,
    tmp_path: Path,
) -> None:
    """SIGSTOP the leader until the standby leads and has done work the frozen one has not
    seen, then SIGCONT it: it wakes with queued changes and a Lease it no longer holds, and
    not one write of it is applied (every request it sends goes through a recording proxy;
    the moment of the takeover is read from the emulator's store)."""
    loop = asyncio.get_running_loop()
    took_over: list[float] = []

    def watch_lease(bucket: str, event: Event) -> None:
        if bucket.endswith("leases") and event.entry.name == LEASE and not took_over:
            lease = msgspec.json.decode(event.entry.raw, type=Lease)
            if lease.spec.holder_identity == "dc-b":
                took_over.append(loop.time())

    emulator.store.add_listener(watch_lease)
    async with recording_proxy(emulator.url) as proxy:
        kubeconfig = proxy.kubeconfig(emulator.kubeconfig, tmp_path / "dc-a.kubeconfig")
        leader = start_controller("dc-a", CDO_DOMAIN_CONTROLLER_KUBECONFIG=str(kubeconfig))
        await leader.wait_ready()
        await wait_for(lambda: _holder_is(cluster, "dc-a"), what="dc-a leads")
        standby = start_controller("dc-b")
        await standby.wait_ready()
        await cluster.create_domain("before", "before-rct")
        await wait_for(lambda: cluster.template("before-rct"), what="dc-a's template")
        assert any(request.applied for request in proxy.sent), "dc-a wrote nothing: no proof"

        leader.process.send(signal.SIGSTOP)
        try:
            await wait_for(lambda: took_over, timeout=LEASE_DURATION_S + 5, what="dc-b leads")
            # Work dc-a will find queued when it wakes: a new domain, and the old one's status.
            await cluster.create_domain("during", "during-rct")
            await wait_for(lambda: cluster.template("during-rct"), what="dc-b's template")
            await standby.wait_idle()
        finally:
            leader.process.send(signal.SIGCONT)
        code = await asyncio.to_thread(leader.process.wait, 15)

    assert code == 1, leader.process.stderr_text()[-2000:]
    lost = [r for r in leader.process.log_records() if "LeadershipLost" in str(r)]
    assert lost, leader.process.stderr_text()[-2000:]
    late = proxy.writes_since(took_over[0])
    assert not late, f"dc-a wrote after dc-b took over: {late}"
    assert await holder(cluster) == "dc-b"
