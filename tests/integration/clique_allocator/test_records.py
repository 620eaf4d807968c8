"""The Placement as a durable record: deletion, and a leader killed between reserving and
pinning."""

from __future__ import annotations

from shared.crds import COMPUTE_DOMAINS, Placement
from sim.kubeapi import KubeServer
from tests.support.wait import wait_for

from .conftest import AllocatorFactory
from .harness import Allocator, Api, Tls, check_no_double_booking, gated
from .test_placement import all_pinned


async def test_a_deleted_domain_keeps_its_placement_until_no_pod_uses_its_claims(
    api: Api, allocator: Allocator
) -> None:
    await api.create_rack(0)
    domain = await api.create_domain("gone")
    # The domain controller's finalizer keeps the domain while it is deleted.
    await api.client.patch(
        COMPUTE_DOMAINS,
        "gone",
        {"metadata": {"finalizers": ["cdo.dev/compute-domain"]}},
        namespace=domain.metadata.namespace,
    )
    uid = await api.create_replicaset("gone-rs", replicas=2)
    names = await api.create_gated_pods("gone", 2, template="gone-rct", owner=("gone-rs", uid))
    pins = await wait_for(lambda: all_pinned(api, names), what="pinned")
    for name, node in pins.items():
        await api.bind(name, node)

    await api.delete_domain("gone")
    await api.finish(names[0])
    await allocator.wait_idle()
    assert await api.placement("gone") is not None  # one pod still uses the domain's claims

    await api.delete_pod(names[1])
    await wait_for(
        lambda: _missing(api, "gone"), what="placement deleted once no pod uses the claims"
    )
    events = [e.reason for e in await api.events("gone")]
    assert "PlacementDeleted" in events


async def _recorded(api: Api, name: str, pods: int) -> Placement | None:
    placement = await api.placement(name)
    if placement is None or sum(len(m.pods) for m in placement.spec.members) < pods:
        return None
    return placement


async def _missing(api: Api, name: str) -> bool:
    return await api.placement(name) is None


async def test_a_leader_killed_between_reserving_and_pinning_books_nothing_twice(
    api: Api,
    emulator: KubeServer,
    start_allocator: AllocatorFactory,
    tls: Tls,
) -> None:
    await api.create_rack(0)
    await api.create_rack(1)
    first = start_allocator("ca-a")
    await first.wait_ready()
    await api.register_webhook(tls, first.webhook_port)
    await api.create_domain("big")
    uid = await api.create_replicaset("big-rs", replicas=4)
    # Pod writes fail from now on: the allocator can reserve but not pin.
    emulator.faults.fail_next(10_000, code=500, verbs=["patch"], resource="pods")
    names = await api.create_gated_pods("big", 4, template="big-rct", owner=("big-rs", uid))
    reserved = await wait_for(
        lambda: _recorded(api, "big", 4), what="reservation naming every pod's node"
    )
    assert reserved.spec.size == 4 and sum(m.gpus for m in reserved.spec.members) == 16
    assert all(gated(pod) for pod in await api.pods())
    first.kill()
    emulator.faults.clear()

    # A new leader (same webhook address) finishes the gang, and a second gang arriving
    # now gets other nodes.
    second = start_allocator("ca-b", webhook_port=first.webhook_port)
    await second.wait_ready()
    await api.create_domain("next")
    next_uid = await api.create_replicaset("next-rs", replicas=4)
    more = await api.create_gated_pods("next", 4, template="next-rct", owner=("next-rs", next_uid))
    pins = await wait_for(lambda: all_pinned(api, names + more), timeout=20, what="both pinned")
    after = await api.placement("big")
    assert after is not None
    assert after.metadata.uid == reserved.metadata.uid
    assert after.spec == reserved.spec  # the restarted leader kept the record as it was
    assert {pins[name] for name in names} == {m.node for m in reserved.spec.members}
    assert not {pins[name] for name in names} & {pins[name] for name in more}
    check_no_double_booking(await api.placements())


async def test_a_conflicting_write_is_read_again_and_retried(
    api: Api, allocator: Allocator, emulator: KubeServer
) -> None:
    await api.create_rack(0)
    await api.create_domain("busy")
    uid = await api.create_replicaset("busy-rs", replicas=2)
    names = await api.create_gated_pods("busy", 1, template="busy-rct", owner=("busy-rs", uid))
    await wait_for(lambda: all_pinned(api, names), what="first pod pinned")
    emulator.faults.fail_next(1, code=409, verbs=["update"], resource="placements")
    more = await api.create_gated_pods("busy-late", 1, template="busy-rct", owner=("busy-rs", uid))
    await wait_for(lambda: all_pinned(api, more), what="second pod pinned after a conflict")
    placement = await api.placement("busy")
    assert placement is not None
    assert sorted(p for m in placement.spec.members for p in m.pods) == sorted(names + more)
    assert await allocator.counter("cdo_reconciles_total", result="error") >= 1
    check_no_double_booking(await api.placements())
