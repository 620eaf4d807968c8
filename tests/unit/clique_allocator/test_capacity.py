"""Clique capacity from the engine's view, and publishing only what changed."""

from __future__ import annotations

from services.clique_allocator.capacity import CapacityLedger, capacity_events
from services.clique_allocator.nodes import node_facts
from shared.events import CliqueCapacity

from .builders import CLIQUE_A, CLIQUE_B, node, rack, record, view


def test_capacity_counts_free_whole_and_stranded_gpus() -> None:
    nodes = [
        node("a-n00"),
        node("a-n01"),
        node("a-n02", ready="False"),
        node("a-n03", unschedulable=True),
        *rack("b", CLIQUE_B, 2),
    ]
    cluster = view(
        nodes,
        one=record(("a-n00", 3, ()), gpus_per_pod=1, channel=0),
        two=record(("a-n02", 2, ()), gpus_per_pod=1, channel=1),
    )
    facts = {f.name: f for item in nodes if (f := node_facts(item)) is not None}
    a, b = capacity_events(cluster, facts)
    assert a.clique == CLIQUE_A and b.clique == CLIQUE_B
    assert (a.nodes_total, a.nodes_healthy, a.nodes_free) == (4, 2, 2)
    assert (a.gpus_total, a.gpus_healthy, a.gpus_free) == (16, 8, 5)
    assert (a.largest_free_block, a.whole_free_nodes) == (4, 1)
    assert a.stranded_gpus == 2 + 4  # free GPUs on the NotReady and the cordoned node
    assert (a.domains, a.channels_free) == (2, 2046)
    assert a.cluster_uuid == CLIQUE_A.split(".")[0]
    states = {n.node: (n.gpus_free, n.healthy, n.schedulable) for n in a.nodes}
    assert states == {
        "a-n00": (1, True, True),
        "a-n01": (4, True, True),
        "a-n02": (2, False, True),
        "a-n03": (4, True, False),
    }
    assert (b.gpus_free, b.whole_free_nodes, b.domains, b.channels_free) == (8, 2, 0, 2048)


def test_the_ledger_publishes_changes_and_empties_gone_cliques() -> None:
    ledger = CapacityLedger()
    first = CliqueCapacity(clique="c1", gpus_total=8, gpus_free=8)
    assert ledger.changes([first]) == [first]
    ledger.record(first)
    same = CliqueCapacity(clique="c1", gpus_total=8, gpus_free=8)  # new id and time
    assert ledger.changes([same]) == []
    less = CliqueCapacity(clique="c1", gpus_total=8, gpus_free=4)
    assert ledger.changes([less]) == [less]
    (gone,) = ledger.changes([])
    assert gone.clique == "c1" and gone.nodes_total == 0 and gone.gpus_total == 0


def test_a_new_leader_starts_from_the_snapshots() -> None:
    ledger = CapacityLedger()
    ledger.load([CliqueCapacity(clique="c1", gpus_total=8, gpus_free=8)])
    assert ledger.changes([CliqueCapacity(clique="c1", gpus_total=8, gpus_free=8)]) == []
