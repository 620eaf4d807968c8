"""A domain whose slices span two cliques, and a Placement of the first release, through the API:
the status per clique, a fault in one slice, the membership events."""

from __future__ import annotations

from tests.support.wait import wait_for

from .cluster import CLIQUE, Cluster, MembershipLog, Slice
from .conftest import Controller, step

OTHER = "0f6d1c1e-8c1d-4bb7-9d49-3f1e0f0c2a11.2"


async def test_a_domain_in_two_cliques_reports_each_and_a_fault_in_one_slice(
    cluster: Cluster, controller: Controller, membership: MembershipLog
) -> None:
    domain = await cluster.create_domain("wide", "wide-rct")
    await step(controller, membership, "wide", before=0, phase="Pending")
    for name, clique, address in [
        ("a1", CLIQUE, "10.0.1.1"),
        ("a2", CLIQUE, "10.0.1.2"),
        ("b1", OTHER, "10.0.2.1"),
    ]:
        await cluster.create_node(name, address=address, clique=clique)
    layout = {"a1": ["wide-0", "wide-1"], "a2": ["wide-2"], "b1": ["wide-3", "wide-4", "wide-5"]}
    for node, pods in layout.items():
        for pod in pods:
            await cluster.create_pod(pod, "wide-rct", node=node)
            await cluster.set_phase(pod, "Running")
    await cluster.place_slices(
        domain,
        [
            Slice(clique=CLIQUE, channel=3, members=[("a1", layout["a1"]), ("a2", layout["a2"])]),
            Slice(clique=OTHER, channel=0, members=[("b1", layout["b1"])]),
        ],
    )
    ready = await step(controller, membership, "wide", before=1, phase="Ready")
    assert (ready.clique, ready.channel, ready.size) == ("", None, 6)
    assert [(s.index, s.clique, s.channel, s.first_rank, s.running) for s in ready.slices] == [
        (0, CLIQUE, 3, 0, 3),
        (1, OTHER, 0, 3, 3),
    ]
    assert [(m.node, m.clique, m.index) for m in ready.members] == [
        ("a1", CLIQUE, 0),
        ("a2", CLIQUE, 1),
        ("b1", OTHER, 0),
    ]
    current = await cluster.domain("wide")
    assert current is not None
    status = current.status
    assert (status.status, status.clique, status.channel) == ("Ready", None, None)
    assert [
        (c.clique, c.channel, c.slices, c.ready_nodes, c.running_pods) for c in status.cliques
    ] == [
        (CLIQUE, 3, (0,), 2, 3),
        (OTHER, 0, (1,), 1, 3),
    ]

    # A fault on the node of slice 1 reaches the domain (Placements are indexed by every
    # member node of every slice) and leaves slice 0's nodes Ready.
    await cluster.taint("b1", fault=True)
    degraded = await step(controller, membership, "wide", before=2, phase="Degraded")
    assert degraded.reason == "NodeFault"
    assert [m.status for m in degraded.members] == ["Ready", "Ready", "NotReady"]
    current = await cluster.domain("wide")
    assert current is not None
    assert [(n.name, n.status) for n in current.status.nodes] == [
        ("a1", "Ready"),
        ("a2", "Ready"),
        ("b1", "NotReady"),
    ]
    assert [c.ready_nodes for c in current.status.cliques] == [2, 0]
    condition = current.status.condition("Degraded")
    assert condition is not None and "b1" in condition.message

    await cluster.taint("b1", fault=False)
    await step(controller, membership, "wide", before=3, phase="Ready")


async def test_a_placement_of_the_first_release_is_read_as_one_slice(
    cluster: Cluster, controller: Controller, membership: MembershipLog
) -> None:
    domain = await cluster.create_domain("old", "old-rct")
    await cluster.create_node("n1", address="10.0.0.1")
    for pod in ("old-0", "old-1"):
        await cluster.create_pod(pod, "old-rct", node="n1")
        await cluster.set_phase(pod, "Running")
    await cluster.place_legacy(domain, [("n1", ["old-0", "old-1"])])
    ready = await wait_for(
        lambda: [e for e in membership.of("old") if e.phase == "Ready"], what="Ready event"
    )
    assert (ready[0].clique, ready[0].channel, ready[0].size) == (CLIQUE, 3, 2)
    current = await cluster.domain("old")
    assert current is not None
    assert (current.status.clique, current.status.channel) == (CLIQUE, 3)
    assert [(n.name, n.clique_id, n.index) for n in current.status.nodes] == [("n1", CLIQUE, 0)]
    placed = current.status.condition("Placed")
    assert placed is not None
    assert placed.message == f"2 pods on 1 nodes of clique {CLIQUE}, channel 3"
