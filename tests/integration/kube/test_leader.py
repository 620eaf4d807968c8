"""Leader election on a Lease in the API emulator: one leader, hand-over, loss."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import msgspec
import pytest

from shared.errors import ConfigError, LeadershipLostError
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.leader import LeaderElectionSettings, LeaderElector, Lease
from shared.kube.resources import CONFIG_MAPS, LEASES
from shared.metrics import Metrics
from sim.kubeapi import KubeServer
from tests.support.wait import wait_for

FAST = LeaderElectionSettings(lease_duration_s=1.0, renew_deadline_s=0.6, retry_period_s=0.1)


def elector(client: KubeClient, identity: str) -> LeaderElector:
    return LeaderElector(
        client, namespace="default", name="controller", identity=identity, settings=FAST
    )


def leading(log: list[str], identity: str) -> Callable[[], Coroutine[Any, Any, None]]:
    async def lead() -> None:
        log.append(identity)
        await asyncio.Event().wait()

    return lead


async def holder(client: KubeClient) -> str:
    raw = await client.get(LEASES, "controller", namespace="default")
    return msgspec.json.decode(raw, type=Lease).spec.holder_identity


async def test_only_one_leads_and_a_released_lease_is_taken_over_at_once(
    kube_client: KubeClient,
) -> None:
    led: list[str] = []
    first, second = elector(kube_client, "a"), elector(kube_client, "b")
    task_a = asyncio.create_task(first.run(leading(led, "a")))
    await wait_for(lambda: led == ["a"], what="a leads")
    task_b = asyncio.create_task(second.run(leading(led, "b")))
    await wait_for(lambda: second.started, what="b tried")
    await asyncio.sleep(0)  # b has looked at the lease at least once and is standing by
    assert led == ["a"] and not second.is_leader
    assert await holder(kube_client) == "a"

    task_a.cancel()  # orderly stop: releases the lease
    await asyncio.gather(task_a, return_exceptions=True)
    await wait_for(lambda: led == ["a", "b"], timeout=3, what="b takes over")
    assert await holder(kube_client) == "b"
    raw = await kube_client.get(LEASES, "controller", namespace="default")
    assert msgspec.json.decode(raw, type=Lease).spec.lease_transitions >= 1
    task_b.cancel()
    await asyncio.gather(task_b, return_exceptions=True)


async def test_a_crashed_leader_is_replaced_after_the_lease_duration(
    kube_client: KubeClient,
) -> None:
    led: list[str] = []
    crashed = elector(kube_client, "crashed")
    assert await crashed.try_acquire_or_renew()  # holds it, then never renews again
    standby = elector(kube_client, "standby")
    loop = asyncio.get_running_loop()
    started = loop.time()
    task = asyncio.create_task(standby.run(leading(led, "standby")))
    await wait_for(lambda: led == ["standby"], timeout=5, what="standby leads")
    assert loop.time() - started >= FAST.lease_duration_s * 0.9
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_a_leader_that_cannot_renew_gives_up(
    kube_client: KubeClient, emulator: KubeServer
) -> None:
    led: list[str] = []
    leader = elector(kube_client, "a")
    task = asyncio.create_task(leader.run(leading(led, "a")))
    await wait_for(lambda: led == ["a"], what="a leads")
    emulator.faults.fail_next(100, code=503, resource="leases")
    with pytest.raises(LeadershipLostError):
        await asyncio.wait_for(task, timeout=5)
    assert not leader.is_leader


async def test_a_renew_stuck_in_flight_ends_leadership_at_the_renew_deadline(
    kube_client: KubeClient, emulator: KubeServer
) -> None:
    """The deadline holds while a renew waits for its answer (here the server takes 5 s to
    answer about the Lease, and the client's request timeout is 30 s): the leader gives up at
    the deadline, before a standby could take over (the lease duration)."""
    led: list[str] = []
    leader = elector(kube_client, "a")
    task = asyncio.create_task(leader.run(leading(led, "a")))
    await wait_for(lambda: led == ["a"], what="a leads")
    loop = asyncio.get_running_loop()
    emulator.faults.set_latency(5.0, resource="leases")
    stalled_at = loop.time()
    with pytest.raises(LeadershipLostError, match="in flight"):
        await asyncio.wait_for(task, timeout=5)
    assert loop.time() - stalled_at < FAST.lease_duration_s
    assert leader.lease_left() == 0


async def test_fenced_writes_end_at_the_renew_deadline(
    kube_client: KubeClient, emulator: KubeServer
) -> None:
    """A leader's writes go through the fenced client: none is sent once the renew deadline
    has passed, and one in flight is given up at the deadline, not after the request timeout."""
    led: list[str] = []
    leader = elector(kube_client, "a")
    writer = kube_client.fenced(leader.lease_left)
    with pytest.raises(LeadershipLostError):  # not leading yet: nothing may be written
        await writer.create(CONFIG_MAPS, config_map("early"), namespace="default")
    task = asyncio.create_task(leader.run(leading(led, "a")))
    await wait_for(lambda: led == ["a"], what="a leads")
    await writer.create(CONFIG_MAPS, config_map("while-leading"), namespace="default")

    emulator.faults.set_latency(5.0, resource="leases")
    emulator.faults.set_latency(2.0, resource="configmaps", verbs=["create"])
    loop = asyncio.get_running_loop()
    sent_at = loop.time()
    with pytest.raises(KubeApiError) as stuck:
        await writer.create(CONFIG_MAPS, config_map("in-flight"), namespace="default")
    assert stuck.value.code in (0, 504)  # given up by the client, or by the server first
    assert loop.time() - sent_at <= FAST.renew_deadline_s + 0.2
    with pytest.raises(LeadershipLostError):
        await asyncio.wait_for(task, timeout=5)
    with pytest.raises(LeadershipLostError, match="refused"):
        await writer.create(CONFIG_MAPS, config_map("after"), namespace="default")
    # A create sent now waits out the same server latency, so once it is answered the write
    # given up at the deadline would have been applied too, had the server not dropped it.
    await kube_client.create(CONFIG_MAPS, config_map("marker"), namespace="default")
    emulator.faults.clear()
    # Reads are never fenced.
    assert await writer.get_or_none(CONFIG_MAPS, "in-flight", namespace="default") is None
    assert await writer.get_or_none(CONFIG_MAPS, "after", namespace="default") is None


def test_timings_out_of_order_are_refused_with_the_settings_named(
    kube_client: KubeClient,
) -> None:
    for settings, named in (
        (LeaderElectionSettings(lease_duration_s=10, renew_deadline_s=10), "renew_deadline_s"),
        (LeaderElectionSettings(renew_deadline_s=2, retry_period_s=2), "retry_period_s"),
    ):
        with pytest.raises(ConfigError, match=named):
            LeaderElector(
                kube_client, namespace="default", name="x", identity="a", settings=settings
            )


def config_map(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}


async def test_a_leader_whose_lease_was_taken_gives_up(kube_client: KubeClient) -> None:
    led: list[str] = []
    leader = elector(kube_client, "a")
    task = asyncio.create_task(leader.run(leading(led, "a")))
    await wait_for(lambda: led == ["a"], what="a leads")
    raw = await kube_client.get(LEASES, "controller", namespace="default")
    lease = msgspec.json.decode(raw, type=Lease)
    await kube_client.patch(
        LEASES,
        "controller",
        {"spec": {"holderIdentity": "usurper"}},
        namespace="default",
    )
    assert lease.spec.holder_identity == "a"
    with pytest.raises(LeadershipLostError):
        await asyncio.wait_for(task, timeout=5)


async def test_the_leader_gauge_follows_the_lease(kube_client: KubeClient) -> None:
    """``leader_election_master_status{name}``: 1 on the holder, 0 on a standby, and it moves
    with a hand-over."""
    led: list[str] = []
    registries = {identity: Metrics() for identity in ("a", "b")}
    electors = {
        identity: LeaderElector(
            kube_client,
            namespace="default",
            name="controller",
            identity=identity,
            settings=FAST,
            metrics=metrics,
        )
        for identity, metrics in registries.items()
    }

    def status(identity: str) -> float | None:
        return registries[identity].registry.get_sample_value(
            "leader_election_master_status", {"name": "controller"}
        )

    assert status("a") == status("b") == 0
    task_a = asyncio.create_task(electors["a"].run(leading(led, "a")))
    await wait_for(lambda: led == ["a"], what="a leads")
    task_b = asyncio.create_task(electors["b"].run(leading(led, "b")))
    await wait_for(lambda: electors["b"].started, what="b tried")
    assert (status("a"), status("b")) == (1, 0)
    task_a.cancel()
    await asyncio.gather(task_a, return_exceptions=True)
    await wait_for(lambda: led == ["a", "b"], timeout=3, what="b takes over")
    assert (status("a"), status("b")) == (0, 1)
    task_b.cancel()
    await asyncio.gather(task_b, return_exceptions=True)


async def test_a_lost_leader_ends_even_when_its_work_swallows_the_cancel(
    kube_client: KubeClient, emulator: KubeServer
) -> None:
    """The process must exit once leadership is lost, so the elector does not wait forever for
    a lead() that ignores its cancellation (a task that swallowed it): it gives up after the
    grace and raises LeadershipLostError."""
    work: list[asyncio.Task[Any]] = []

    async def stubborn() -> None:
        task = asyncio.current_task()
        assert task is not None
        work.append(task)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.Event().wait()  # the first cancel is swallowed; a second one ends it

    leader = LeaderElector(
        kube_client,
        namespace="default",
        name="controller",
        identity="a",
        settings=FAST,
        lead_stop_grace_s=0.3,
    )
    task = asyncio.create_task(leader.run(stubborn))
    await wait_for(lambda: work, what="a leads")
    emulator.faults.fail_next(100, code=503, resource="leases")
    with pytest.raises(LeadershipLostError):
        await asyncio.wait_for(task, timeout=5)
    assert not leader.is_leader and not work[0].done()
    work[0].cancel()
    await asyncio.gather(work[0], return_exceptions=True)
