"""Clique capacity events: published on every real change, kept in the KV snapshot."""

from __future__ import annotations

from shared.bus import EventBus
from shared.events import CliqueCapacity
from shared.kube.resources import NODES
from tests.conftest import BusFactory
from tests.support.wait import wait_for

from .harness import Allocator, Api, CapacityLog, clique_id
from .test_placement import all_pinned


async def test_capacity_follows_placements_and_faults(
    api: Api, allocator: Allocator, bus_factory: BusFactory
) -> None:
    log = await CapacityLog(await bus_factory("observer")).start()
    nodes = await api.create_rack(0)
    clique = clique_id(0)

    def has(**fields: int) -> CliqueCapacity | None:
        event = log.latest(clique)
        if event is None or any(getattr(event, k) != v for k, v in fields.items()):
            return None
        return event

    empty = await wait_for(lambda: has(nodes_total=4, gpus_free=16), what="empty rack published")
    assert (empty.gpus_total, empty.whole_free_nodes, empty.largest_free_block) == (16, 4, 4)
    assert (empty.nodes_healthy, empty.stranded_gpus, empty.domains) == (4, 0, 0)
    assert empty.channels_free == 2048 and [n.slot for n in empty.nodes] == [0, 1, 2, 3]

    await api.create_domain("small")
    uid = await api.create_replicaset("small-rs", replicas=3)
    names = await api.create_gated_pods(
        "small", 3, template="small-rct", owner=("small-rs", uid), gpus=1
    )
    await wait_for(lambda: all_pinned(api, names), what="pinned")
    placed = await wait_for(lambda: has(gpus_free=13), what="capacity after placement")
    assert (placed.domains, placed.channels_free, placed.whole_free_nodes) == (1, 2047, 3)
    assert (placed.nodes_free, placed.largest_free_block) == (4, 4)

    # A whole free node goes bad: its GPUs are stranded, not free.
    await api.taint(nodes[3], fault=True)
    faulty = await wait_for(lambda: has(stranded_gpus=4), what="capacity after a fault")
    assert (faulty.nodes_healthy, faulty.gpus_healthy, faulty.gpus_free) == (3, 12, 9)
    assert not next(n for n in faulty.nodes if n.node == nodes[3]).healthy

    snapshot = await wait_for(lambda: log.snapshot(clique), what="snapshot")
    assert snapshot.id == faulty.id

    # Nothing that capacity depends on changes: nothing is published.
    count = len(log.of(clique))
    await api.client.patch(NODES, nodes[0], {"metadata": {"annotations": {"note": "x"}}})
    await allocator.wait_idle()
    await bus_flush(log.bus)
    assert len(log.of(clique)) == count


async def bus_flush(bus: EventBus) -> None:
    await bus.nc.flush()
