"""The plan when an operator cordons, drains and uncordons a member node: a cordon moves nothing
that runs; a drained member's replacement is seated on another node of the same clique, never
on the cordoned node nor in another clique; an uncordoned node takes members again."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from services.clique_allocator.gang import GangSize
from services.clique_allocator.plan import plan_domain
from services.clique_allocator.planning.outcome import Pin, Plan
from shared.crds.placement import PlacementSpec
from shared.kube.models import Node, Pod

from .builders import CLIQUE_A, CLIQUE_B, domain, node, pod, rack, record, view

CORDON_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
SEATED = record(("a-n00", 1, ("p0",)), ("a-n01", 1, ("p1",)))
"""Two pods of 4 GPUs on a-n00 and a-n01 of clique A."""


def cordoned(name: str, *, by_taint: bool = False) -> Node:
    if by_taint:
        return node(name, taints=[CORDON_TAINT])
    return node(name, unschedulable=True)


def nodes_with(*replaced: Node) -> list[Node]:
    """Racks A and B of four nodes each, with ``replaced`` instead of A's nodes of that name."""
    by_name = {n.metadata.name: n for n in replaced}
    rack_a = [by_name.get(n.metadata.name, n) for n in rack("a", CLIQUE_A)]
    return [*rack_a, *rack("b", CLIQUE_B)]


def run(pods: Sequence[Pod], nodes: list[Node], placement: PlacementSpec, gang: int = 2) -> Plan:
    return plan_domain(
        key="default/train",
        domain=domain(),
        placement=placement,
        pods=pods,
        gang=GangSize(pods=gang, source="ReplicaSet"),
        view=view(nodes, train=placement),
    )


def seats(plan: Plan) -> dict[str, tuple[str, ...]]:
    assert plan.record is not None
    return {
        member.node: tuple(sorted(p.name for p in member.pods))
        for piece in plan.record.all_slices
        for member in piece.members
    }


def running(name: str, node_name: str, *, deleting: bool = False) -> Pod:
    return pod(
        name,
        gated=False,
        phase="Running",
        node_name=node_name,
        pinned_to=node_name,
        deleting=deleting,
    )


@pytest.mark.parametrize("by_taint", [False, True], ids=["spec.unschedulable", "cordon taint"])
def test_a_cordon_keeps_running_members_where_they_are(by_taint: bool) -> None:
    pods = [running("p0", "a-n00"), running("p1", "a-n01")]

    plan = run(pods, nodes_with(cordoned("a-n01", by_taint=by_taint)), SEATED)

    assert seats(plan) == {"a-n00": ("p0",), "a-n01": ("p1",)}
    assert plan.pins == () and not plan.waiting and not plan.released


@pytest.mark.parametrize("by_taint", [False, True], ids=["spec.unschedulable", "cordon taint"])
def test_a_drained_members_replacement_goes_to_another_node_of_the_clique(by_taint: bool) -> None:
    # kubectl drain evicted p1 from a-n01; its ReplicaSet made p2, gated by the webhook.
    pods = [running("p0", "a-n00"), pod("p2")]

    plan = run(pods, nodes_with(cordoned("a-n01", by_taint=by_taint)), SEATED)

    assert seats(plan) == {"a-n00": ("p0",), "a-n02": ("p2",)}
    assert plan.pins == (Pin(pod="p2", node="a-n02"),)
    assert plan.record is not None and plan.record.slices[0].clique == CLIQUE_A


def test_a_member_still_terminating_on_the_drained_node_gives_its_seat_to_the_replacement() -> None:
    evicted = running("p1", "a-n01", deleting=True)
    pods = [running("p0", "a-n00"), evicted, pod("p2")]

    plan = run(pods, nodes_with(cordoned("a-n01")), SEATED)

    assert seats(plan) == {"a-n00": ("p0",), "a-n02": ("p2",)}
    assert plan.pins == (Pin(pod="p2", node="a-n02"),)


def test_with_every_other_node_of_the_clique_taken_the_replacement_waits_in_its_clique() -> None:
    full = record(*((f"a-n0{i}", 1, (f"p{i}",)) for i in range(4)))
    pods = [running(f"p{i}", f"a-n0{i}") for i in (0, 1, 2)] + [pod("p4")]

    plan = run(pods, nodes_with(cordoned("a-n03")), full, gang=4)

    assert "a-n03" not in seats(plan)
    assert not any(node.startswith("b-") for node in seats(plan))  # never another clique
    (hold,) = plan.holds
    assert (hold.pod, hold.reason) == ("p4", "CliqueFull")


def test_an_uncordoned_node_takes_members_again() -> None:
    full = record(*((f"a-n0{i}", 1, (f"p{i}",)) for i in range(3)), size=4)
    pods = [running(f"p{i}", f"a-n0{i}") for i in (0, 1, 2)] + [pod("p3")]

    closed = run(pods, nodes_with(cordoned("a-n03")), full, gang=4)
    opened = run(pods, nodes_with(), full, gang=4)

    assert closed.pins == () and [h.reason for h in closed.holds] == ["CliqueFull"]
    assert opened.pins == (Pin(pod="p3", node="a-n03"),)
    assert seats(opened)["a-n03"] == ("p3",)
