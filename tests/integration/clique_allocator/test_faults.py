"""Fault awareness: troubled nodes get no new pods; a replaced pod stays in its clique."""

from __future__ import annotations

from tests.conftest import BusFactory
from tests.support.wait import wait_for

from .harness import (
    Allocator,
    Api,
    CapacityLog,
    check_no_double_booking,
    clique_id,
    members,
    placed_condition,
)
from .test_placement import all_pinned


async def test_faulty_not_ready_cordoned_and_unlabelled_nodes_get_no_pods(
    api: Api, allocator: Allocator
) -> None:
    nodes = await api.create_rack(0, nodes=8)
    await api.taint(nodes[0], fault=True)
    await api.cordon(nodes[1], True)
    await api.set_ready(nodes[2], False)
    await api.unlabel(nodes[3])  # the health monitor's verdict on fabric trouble
    await api.create_domain("picky")
    uid = await api.create_replicaset("picky-rs", replicas=5)
    names = await api.create_gated_pods("picky", 4, template="picky-rct", owner=("picky-rs", uid))

    async def held() -> bool:
        pod = await api.pod(names[0])
        return pod is not None and placed_condition(pod) == ("False", "InsufficientCapacity")

    await wait_for(held, what="5 whole nodes do not fit on 4 healthy ones")
    await api.scale("picky-rs", 4)
    pins = await wait_for(lambda: all_pinned(api, names), what="pinned to healthy nodes")
    assert set(pins.values()) == set(nodes[4:])

    # A node that recovers is used again.
    await api.cordon(nodes[1], False)
    await api.scale("picky-rs", 5)
    (late,) = await api.create_gated_pods(
        "picky-late", 1, template="picky-rct", owner=("picky-rs", uid)
    )
    pins = await wait_for(lambda: all_pinned(api, [late]), what="recovered node used")
    assert pins == {late: nodes[1]}


async def test_a_replacement_goes_to_a_healthy_node_of_the_same_clique_or_waits(
    api: Api, allocator: Allocator, bus_factory: BusFactory
) -> None:
    capacity = await CapacityLog(await bus_factory("observer")).start()
    rack0 = await api.create_rack(0, nodes=3)
    await api.create_rack(1, nodes=3)
    await api.create_domain("job")
    uid = await api.create_replicaset("job-rs", replicas=2)
    names = await api.create_gated_pods("job", 2, template="job-rct", owner=("job-rs", uid))
    pins = await wait_for(lambda: all_pinned(api, names), timeout=30, what="pinned")
    placement = await api.placement("job")
    assert placement is not None and placement.spec.slices[0].clique == clique_id(0)
    for name, node in pins.items():
        await api.bind(name, node)

    # The node of the first pod fails; its pod is evicted and its workload replaces it.
    failed = pins[names[0]]
    await api.set_ready(failed, False)
    await capacity.node_seen_unhealthy(clique_id(0), failed)
    await api.delete_pod(names[0])
    (replacement,) = await api.create_gated_pods(
        "job-r", 1, template="job-rct", owner=("job-rs", uid)
    )
    moved = await wait_for(
        lambda: all_pinned(api, [replacement]), timeout=30, what="replacement pinned"
    )
    spare = (set(rack0) - set(pins.values())).pop()
    assert moved == {replacement: spare}  # same clique, healthy node; rack 1 stays untouched
    placement = await api.placement("job")
    assert placement is not None
    assert failed not in {m.node for m in members(placement.spec)}
    check_no_double_booking(await api.placements())

    # Another failure with no healthy node left in the clique: the replacement waits.
    await api.bind(replacement, spare)
    await api.set_ready(spare, False)
    await capacity.node_seen_unhealthy(clique_id(0), spare)
    await api.delete_pod(replacement)
    (second,) = await api.create_gated_pods("job-s", 1, template="job-rct", owner=("job-rs", uid))

    async def waits() -> bool:
        pod = await api.pod(second)
        return pod is not None and placed_condition(pod) == ("False", "CliqueFull")

    await wait_for(waits, timeout=30, what="replacement waits in its clique")
    pod = await api.pod(second)
    assert pod is not None
    condition = pod.condition("cdo.dev/Placed")
    assert condition is not None and clique_id(0) in condition.message

    # The first node recovers: the waiting pod goes there, still in the domain's clique.
    await api.set_ready(failed, True)
    back = await wait_for(
        lambda: all_pinned(api, [second]), timeout=30, what="placed after recovery"
    )
    assert back == {second: failed}
