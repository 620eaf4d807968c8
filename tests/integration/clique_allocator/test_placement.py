"""Gang placement through the API: reservation, pins, gates, records, growth and shrinking."""

from __future__ import annotations

from tests.support.wait import wait_for

from .harness import (
    Allocator,
    Api,
    check_no_double_booking,
    clique_id,
    gated,
    members,
    pinned,
    placed_condition,
    pod_nodes,
)


async def all_pinned(api: Api, names: list[str]) -> dict[str, str] | None:
    pods = {pod.metadata.name: pod for pod in await api.pods()}
    found = {name: pinned(pods[name]) for name in names if name in pods}
    complete = len(found) == len(names) and all(found.values())
    if complete and not any(gated(pods[name]) for name in names):
        return found
    return None


async def test_a_gang_is_reserved_whole_pinned_and_recorded(api: Api, allocator: Allocator) -> None:
    rack0 = await api.create_rack(0)
    await api.create_rack(1)
    domain = await api.create_domain("train")
    uid = await api.create_replicaset("train-rs", replicas=4)
    names = await api.create_gated_pods("train", 4, template="train-rct", owner=("train-rs", uid))
    pins = await wait_for(lambda: all_pinned(api, names), timeout=15, what="pods pinned")
    placement = await api.placement("train")
    assert placement is not None
    spec = placement.spec
    assert (spec.slices[0].clique, spec.gpus_per_pod, spec.size, spec.slices[0].channel) == (
        clique_id(0),
        4,
        4,
        0,
    )
    assert [m.node for m in members(spec)] == rack0
    assert pod_nodes(spec) == pins
    assert placement.metadata.owner_references[0].uid == domain.metadata.uid
    check_no_double_booking(await api.placements())


async def test_gangs_take_separate_racks_and_a_gang_that_cannot_fit_waits_then_lands(
    api: Api, allocator: Allocator
) -> None:
    await api.create_rack(0)
    await api.create_rack(1)
    pods: dict[str, list[str]] = {}
    for name in ("a", "b", "c"):
        await api.create_domain(name)
        uid = await api.create_replicaset(f"{name}-rs", replicas=4)
        pods[name] = await api.create_gated_pods(
            name, 4, template=f"{name}-rct", owner=(f"{name}-rs", uid)
        )
    await wait_for(lambda: all_pinned(api, pods["a"] + pods["b"]), what="a and b pinned")
    a, b = await api.placement("a"), await api.placement("b")
    assert a is not None and b is not None
    assert {a.spec.slices[0].clique, b.spec.slices[0].clique} == {clique_id(0), clique_id(1)}

    async def c_waits() -> bool:
        found = [await api.pod(name) for name in pods["c"]]
        return all(
            pod is not None and placed_condition(pod) == ("False", "InsufficientCapacity")
            for pod in found
        )

    await wait_for(c_waits, what="c held with a reason")
    assert await api.placement("c") is None
    first = await api.pod(pods["c"][0])
    assert first is not None and gated(first) and not pinned(first)
    condition = first.condition("cdo.dev/Placed")
    assert condition is not None
    assert condition.message.startswith("no clique has 4 nodes with 4 free GPUs")
    warnings = [e for e in await api.events("c") if e.reason == "InsufficientCapacity"]
    assert warnings and warnings[0].type == "Warning"

    # a's workload goes away: its slots are released and c takes them.
    await api.scale("a-rs", 0)
    for name in pods["a"]:
        await api.delete_pod(name)
    await wait_for(lambda: all_pinned(api, pods["c"]), what="c placed once room appeared")
    c = await api.placement("c")
    assert c is not None and c.spec.slices[0].clique == a.spec.slices[0].clique

    async def c_placed() -> bool:
        after = await api.pod(pods["c"][0])
        return after is not None and placed_condition(after) == ("True", "Placed")

    # The condition is written after the pin: wait for it (a pinned pod never keeps False).
    await wait_for(c_placed, what="c's pod Placed=True")
    released = await api.placement("a")
    assert released is not None and members(released.spec) == [] and released.spec.size == 0
    check_no_double_booking(await api.placements())


async def test_scaling_releases_and_regrows_in_the_same_clique(
    api: Api, allocator: Allocator
) -> None:
    await api.create_rack(0)
    await api.create_rack(1)
    await api.create_domain("elastic")
    uid = await api.create_replicaset("elastic-rs", replicas=4)
    names = await api.create_gated_pods(
        "elastic", 4, template="elastic-rct", owner=("elastic-rs", uid)
    )
    await wait_for(lambda: all_pinned(api, names), what="4 pinned")
    first = await api.placement("elastic")
    assert first is not None

    await api.scale("elastic-rs", 2)
    await api.delete_pod(names[2])
    await api.delete_pod(names[3])

    async def shrunk() -> bool:
        placement = await api.placement("elastic")
        return placement is not None and sum(m.gpus for m in members(placement.spec)) == 8

    await wait_for(shrunk, what="reservation shrunk to 2 pods")
    # Another domain takes the other rack whole, so regrowth must fit in the first.
    await api.create_domain("other")
    other_uid = await api.create_replicaset("other-rs", replicas=4)
    other = await api.create_gated_pods(
        "other", 4, template="other-rct", owner=("other-rs", other_uid)
    )
    await wait_for(lambda: all_pinned(api, other), what="other pinned")

    await api.scale("elastic-rs", 4)
    more = await api.create_gated_pods(
        "elastic-new", 2, template="elastic-rct", owner=("elastic-rs", uid)
    )
    await wait_for(lambda: all_pinned(api, more), what="regrown")
    grown = await api.placement("elastic")
    assert grown is not None
    assert (
        grown.spec.slices[0].clique == first.spec.slices[0].clique
        and grown.spec.slices[0].channel == first.spec.slices[0].channel
    )
    assert grown.spec.size == 4
    assert grown.spec.placed_pods == 4
    check_no_double_booking(await api.placements())
