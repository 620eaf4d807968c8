"""The simulated control plane's leaders keep their Lease through a stall of the API emulator
as long as the longest measured on this machine under load (docs/simulator.md, "Where a pod's
time goes"): a step-down costs the simulated cluster its allocator (no placement, no webhook)
for about 10 s while the process starts again."""

from __future__ import annotations

import asyncio

import msgspec

from services.clique_allocator import settings as allocator_settings
from shared.kube.client import KubeClient
from shared.kube.leader import LeaderElector, Lease
from shared.kube.resources import LEASES
from sim.controlplane import service_env
from sim.kubeapi import KubeServer
from tests.support.wait import wait_for

STALL_S = 4.5
"""The longest GET of the emulator measured during a ``cdo sim up`` bring-up at load 5 to 7."""


async def renew_time(client: KubeClient) -> str:
    raw = await client.get(LEASES, "controller", namespace="default")
    return msgspec.json.decode(raw, type=Lease).spec.renew_time


async def test_the_simulated_leaders_ride_out_an_api_stall(
    kube_client: KubeClient, emulator: KubeServer
) -> None:
    env = service_env(
        prefix=allocator_settings.ENV_PREFIX,
        name="clique-allocator",
        kubeconfig="/state/kubeconfig",
        http_port=8123,
        extra={},
    )
    timing = allocator_settings.load(env).leader_election
    led: list[str] = []

    async def lead() -> None:
        led.append("a")
        await asyncio.Event().wait()

    leader = LeaderElector(
        kube_client, namespace="default", name="controller", identity="a", settings=timing
    )
    task = asyncio.create_task(leader.run(lead))
    try:
        await wait_for(lambda: led == ["a"], what="a leads")
        # The stall: every read of the Lease (a renew's first request) waits this long.
        emulator.faults.set_latency(STALL_S, verbs=("get",), resource="leases")
        await asyncio.sleep(STALL_S)  # how long the API stalls, not a wait for a state
        emulator.faults.clear()
        after_stall = await renew_time(kube_client)

        async def renewed_since() -> bool:
            return task.done() or await renew_time(kube_client) != after_stall

        await wait_for(renewed_since, what="a renewal after the stall")
        assert not task.done(), f"the leader stepped down: {task.exception()!r}"
        assert leader.is_leader and leader.lease_left() > 0
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
