"""Lease-based leader election (kubernetes_asyncio.leaderelection) hands over."""

from __future__ import annotations

import asyncio

from kubernetes_asyncio import client
from kubernetes_asyncio.leaderelection import electionconfig, leaderelection
from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

from tests.support.wait import wait_for


async def test_leader_hands_over_when_leader_stops(api_client: client.ApiClient) -> None:
    leading: list[str] = []

    def candidate(identity: str) -> leaderelection.LeaderElection:
        async def started() -> None:
            leading.append(identity)
            await asyncio.Event().wait()

        async def stopped() -> None:
            pass

        lock = LeaseLock("cdo-controller", "kube-system", identity, api_client)
        config = electionconfig.Config(
            lock,
            lease_duration=2,
            renew_deadline=1.5,
            retry_period=1,
            onstarted_leading=started,
            onstopped_leading=stopped,
        )
        return leaderelection.LeaderElection(config)

    first = asyncio.create_task(candidate("alpha").run())
    await wait_for(lambda: leading == ["alpha"], timeout=10, what="alpha leads")
    second = asyncio.create_task(candidate("beta").run())
    coordination = client.CoordinationV1Api(api_client)
    lease = await coordination.read_namespaced_lease("cdo-controller", "kube-system")
    assert lease.spec.holder_identity == "alpha"
    first.cancel()  # the leader stops renewing
    try:
        await wait_for(lambda: "beta" in leading, timeout=15, what="beta takes over")
        lease = await coordination.read_namespaced_lease("cdo-controller", "kube-system")
        assert lease.spec.holder_identity == "beta"
        assert leading == ["alpha", "beta"]
    finally:
        second.cancel()
        await asyncio.gather(first, second, return_exceptions=True)
