"""The Placement as a durable record: deletion, a leader killed between reserving and pinning,
and a record of the first release read by this one."""

from __future__ import annotations

from shared.crds import COMPUTE_DOMAINS, PLACEMENTS, Placement
from sim.kubeapi import KubeServer
from tests.support.wait import wait_for

from .conftest import AllocatorFactory
from .harness import (
    Allocator,
    Api,
    Tls,
    check_no_double_booking,
    clique_id,
    gated,
    members,
    placed_condition,
    pod_nodes,
)
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

    async def deleted_event() -> bool:
        # Recorded after the delete (notices follow the writes): wait for it, too.
        return "PlacementDeleted" in [e.reason for e in await api.events("gone")]

    await wait_for(deleted_event, what="the PlacementDeleted event")


async def _recorded(api: Api, name: str, pods: int) -> Placement | None:
    placement = await api.placement(name)
    if placement is None or placement.spec.placed_pods < pods:
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
    assert reserved.spec.size == 4 and sum(m.gpus for m in members(reserved.spec)) == 16
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
    assert {pins[name] for name in names} == {m.node for m in members(reserved.spec)}
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
    assert sorted(pod_nodes(placement.spec)) == sorted(names + more)
    assert await allocator.counter("controller_runtime_reconcile_total", result="error") >= 1
    check_no_double_booking(await api.placements())


async def test_a_placement_of_the_first_release_is_honoured_after_an_upgrade(
    api: Api, start_allocator: AllocatorFactory, tls: Tls
) -> None:
    """The previous release recorded one clique per Placement (pods as plain names). The new
    allocator keeps those reservations, books nothing twice and rewrites them in slices."""
    rack0 = await api.create_rack(0)
    await api.create_rack(1)
    old = await api.create_domain("old")
    uid = await api.create_replicaset("old-rs", replicas=4)
    names = [f"old-{index:02d}" for index in range(4)]
    for name, node in zip(names, rack0, strict=True):
        await api.create_pod(name, template="old-rct", owner=("old-rs", uid), pinned_to=node)
        await api.bind(name, node)
    legacy = {
        "apiVersion": PLACEMENTS.api_version,
        "kind": PLACEMENTS.kind,
        "metadata": {
            "name": "old",
            "namespace": "default",
            "ownerReferences": [
                {
                    "apiVersion": COMPUTE_DOMAINS.api_version,
                    "kind": COMPUTE_DOMAINS.kind,
                    "name": "old",
                    "uid": old.metadata.uid,
                    "controller": True,
                }
            ],
        },
        "spec": {
            "clique": clique_id(0),
            "channel": 0,
            "gpusPerPod": 4,
            "size": 4,
            "members": [
                {"node": node, "slot": slot, "gpus": 4, "pods": [name]}
                for slot, (name, node) in enumerate(zip(names, rack0, strict=True))
            ],
        },
    }
    await api.client.create(PLACEMENTS, legacy, namespace="default")

    allocator = start_allocator()
    await allocator.wait_ready()
    await api.register_webhook(tls, allocator.webhook_port)
    await api.create_domain("new")
    new_uid = await api.create_replicaset("new-rs", replicas=4)
    fresh = await api.create_gated_pods("new", 4, template="new-rct", owner=("new-rs", new_uid))
    await api.create_domain("extra")
    extra_uid = await api.create_replicaset("extra-rs", replicas=1)
    late = await api.create_gated_pods(
        "extra", 1, template="extra-rct", owner=("extra-rs", extra_uid)
    )

    pins = await wait_for(lambda: all_pinned(api, fresh), what="the new domain pinned")
    assert {pins[name] for name in fresh}.isdisjoint(rack0)

    async def late_waits() -> bool:
        conditions = {placed_condition(p) for p in await api.pods() if p.metadata.name in late}
        return conditions == {("False", "InsufficientCapacity")}

    await wait_for(late_waits, what="a third domain waiting: the old record's GPUs are taken")

    async def rewritten() -> Placement | None:
        found = await api.placement("old")
        return found if found is not None and found.spec.slices else None

    after = await wait_for(rewritten, what="the old record rewritten in slices")
    assert (after.spec.clique, after.spec.channel, after.spec.members) == ("", None, ())
    (piece,) = after.spec.slices
    assert (piece.clique, piece.channel, piece.size) == (clique_id(0), 0, 4)
    assert pod_nodes(after.spec) == dict(zip(names, rack0, strict=True))
    assert sorted(p.rank for m in piece.members for p in m.pods) == [0, 1, 2, 3]
    check_no_double_booking(await api.placements())


async def test_a_domain_of_pods_without_gpus_keeps_its_channel_across_a_new_leader(
    api: Api, start_allocator: AllocatorFactory, tls: Tls
) -> None:
    # NVIDIA's channel check: a bare pod whose only claim is the domain's channel, no GPU.
    await api.create_rack(0)
    first = start_allocator("ca-a")
    await first.wait_ready()
    await api.register_webhook(tls, first.webhook_port)
    await api.create_domain("smoke")
    (smoke,) = await api.create_gated_pods("smoke", 1, template="smoke-rct", owner=None, gpus=0)
    pins = await wait_for(lambda: all_pinned(api, [smoke]), what="the pod without GPUs pinned")
    held = await api.placement("smoke")
    assert held is not None
    (piece,) = held.spec.slices
    assert (held.spec.gpus_per_pod, held.spec.size, held.spec.channel_only) == (0, 0, 1)
    assert (piece.clique, piece.channel) == (clique_id(0), 0)
    assert [ref.name for m in piece.members for ref in m.channel_only_pods] == [smoke]
    assert pins[smoke] in {m.node for m in piece.members}
    first.kill()

    # A new leader builds its view from the Placements: the channel stays the domain's.
    second = start_allocator("ca-b", webhook_port=first.webhook_port)
    await second.wait_ready()
    await api.create_domain("other")
    (other,) = await api.create_gated_pods("other", 1, template="other-rct", owner=None, gpus=0)
    await wait_for(lambda: all_pinned(api, [other]), what="the second domain's pod pinned")
    placed = await api.placement("other")
    assert placed is not None
    assert [(p.clique, p.channel) for p in placed.spec.slices] == [(clique_id(0), 1)]
