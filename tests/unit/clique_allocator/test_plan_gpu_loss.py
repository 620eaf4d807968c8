"""A node that lost a GPU (its device plugin took it out of allocatable) can no longer hold the
whole-node slot the domain kept there for a replacement: the slot goes, and the replacement is
seated on another node of the slice's clique."""

from __future__ import annotations

from services.clique_allocator.gang import GangSize
from services.clique_allocator.plan import plan_domain

from .builders import CLIQUE_A, domain, node, pod, record, view

NODES = [node(f"a-n{i:02d}", clique=CLIQUE_A, gpus=3 if i == 0 else 4) for i in range(5)]
# p0 was evicted from a-n00 (its GPU 0 failed); its replacement p4 waits.
HELD = record(
    ("a-n00", 1, ()),
    ("a-n01", 1, ("p1",)),
    ("a-n02", 1, ("p2",)),
    ("a-n03", 1, ("p3",)),
    size=4,
)
PODS = [
    *(pod(f"p{i}", gated=False, node_name=f"a-n0{i}", phase="Running") for i in (1, 2, 3)),
    pod("p4"),
]


def test_the_replacement_leaves_a_node_that_lost_a_gpu() -> None:
    plan = plan_domain(
        key="default/train",
        domain=domain(),
        placement=HELD,
        pods=PODS,
        gang=GangSize(pods=4, source="ReplicaSet"),
        view=view(NODES, train=HELD),
    )
    assert [(pin.pod, pin.node) for pin in plan.pins] == [("p4", "a-n04")]
    assert plan.record is not None
    assert "a-n00" not in plan.record.nodes


def test_a_node_with_its_gpus_keeps_the_free_slot() -> None:
    whole = [node(f"a-n{i:02d}", clique=CLIQUE_A) for i in range(5)]
    plan = plan_domain(
        key="default/train",
        domain=domain(),
        placement=HELD,
        pods=PODS,
        gang=GangSize(pods=4, source="ReplicaSet"),
        view=view(whole, train=HELD),
    )
    assert [(pin.pod, pin.node) for pin in plan.pins] == [("p4", "a-n00")]
