"""The per-domain plan: release, reserve, pin, hold — situations and what the plan does."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from services.clique_allocator.gang import GangSize, UnknownSize
from services.clique_allocator.placement import ClusterView
from services.clique_allocator.plan import plan_domain
from services.clique_allocator.planning.outcome import Pin, Plan
from shared.crds.computedomain import ComputeDomain
from shared.crds.placement import PlacementSpec
from shared.kube.models import Node, Pod

from .builders import CLIQUE_A, CLIQUE_B, domain, node, pod, rack, record, view

RACK_A = rack("a", CLIQUE_A)
RACK_B = rack("b", CLIQUE_B)


def run(
    pods: Sequence[Pod],
    *,
    gang: int | UnknownSize = 4,
    placement: PlacementSpec | None = None,
    cd: ComputeDomain | None = None,
    nodes: list[Node] | None = None,
    cluster: ClusterView | None = None,
) -> Plan:
    nodes = RACK_A + RACK_B if nodes is None else nodes
    records = {"train": placement} if placement is not None else {}
    size = gang if isinstance(gang, UnknownSize) else GangSize(pods=gang, source="ReplicaSet")
    return plan_domain(
        key="default/train",
        domain=domain() if cd is None else cd,
        placement=placement,
        pods=pods,
        gang=size,
        view=cluster or view(nodes, **records),
    )


def members(plan: Plan) -> list[tuple[str, int, tuple[str, ...]]]:
    """(node, slots, pods by name) over every slice of the plan's record."""
    assert plan.record is not None
    spec = plan.record
    return [
        (m.node, m.gpus // spec.gpus_per_pod, tuple(sorted(p.name for p in m.pods)))
        for piece in spec.all_slices
        for m in piece.members
    ]


def test_nothing_to_do_before_the_first_pod() -> None:
    assert run([]) == Plan()


def test_the_first_pod_reserves_the_whole_gang_and_is_pinned() -> None:
    plan = run([pod("p0")])
    assert plan.action == "write"
    assert plan.record is not None
    assert (plan.record.slices[0].clique, plan.record.slices[0].channel, plan.record.size) == (
        CLIQUE_A,
        0,
        4,
    )
    assert members(plan) == [
        ("a-n00", 1, ("p0",)),
        ("a-n01", 1, ()),
        ("a-n02", 1, ()),
        ("a-n03", 1, ()),
    ]
    assert plan.pins == (Pin(pod="p0", node="a-n00"),)
    assert [n.reason for n in plan.notices] == ["Reserved"]
    assert plan.notices[0].message == (
        "reserved 4 pods of 4 GPUs on 4 nodes of clique " + CLIQUE_A + ", channel 0"
    )


def test_later_pods_take_the_reserved_slots_in_slot_order() -> None:
    held = record(("a-n00", 1, ("p0",)), ("a-n01", 1, ()), ("a-n02", 1, ()), ("a-n03", 1, ()))
    plan = run([pod("p0", gated=False, pinned_to="a-n00"), pod("p2"), pod("p1")], placement=held)
    assert plan.pins == (Pin(pod="p1", node="a-n01"), Pin(pod="p2", node="a-n02"))
    assert members(plan)[:3] == [
        ("a-n00", 1, ("p0",)),
        ("a-n01", 1, ("p1",)),
        ("a-n02", 1, ("p2",)),
    ]
    assert plan.notices == ()  # no new slots: nothing to tell


def test_a_recorded_pod_still_gated_is_pinned_again_to_its_node() -> None:
    """The allocator died after writing the record and before patching the pod."""
    held = record(("a-n00", 1, ()), ("a-n01", 1, ("p1",)), ("a-n02", 1, ()), ("a-n03", 1, ()))
    plan = run([pod("p1")], placement=held)
    assert plan.action == "keep"
    assert plan.pins == (Pin(pod="p1", node="a-n01"),)


def test_a_record_that_predates_uids_learns_the_uid_of_each_pod_it_seats() -> None:
    """The IMEX agents grant a channel only to the pod whose uid its seat records, so a seat
    written without one takes its live pod's uid at the next plan (and the record is written)."""
    held = msgspec.structs.replace(record(("a-n00", 1, ("p0",)), ("a-n01", 1, ("p1",))), size=2)
    without = msgspec.structs.replace(
        held,
        slices=tuple(
            msgspec.structs.replace(
                piece,
                members=tuple(
                    msgspec.structs.replace(
                        m, pods=tuple(msgspec.structs.replace(p, uid="") for p in m.pods)
                    )
                    for m in piece.members
                ),
            )
            for piece in held.slices
        ),
    )
    live = [pod("p0", gated=False, uid="u-0"), pod("p1", gated=False, uid="u-1")]
    plan = run(live, gang=2, placement=without)
    assert plan.action == "write"
    assert plan.record is not None
    seats = {p.name: p.uid for m in plan.record.slices[0].members for p in m.pods}
    assert seats == {"p0": "u-0", "p1": "u-1"}
    assert run(live, gang=2, placement=plan.record).action == "keep"


def test_a_finished_pod_frees_its_slot_for_the_next() -> None:
    held = record(("a-n00", 1, ("p0",)), ("a-n01", 1, ("p1",)))
    plan = run(
        [pod("p0", gated=False, phase="Succeeded"), pod("p1", gated=False), pod("p2")],
        gang=2,
        placement=held,
    )
    assert plan.pins == (Pin(pod="p2", node="a-n00"),)
    assert members(plan) == [("a-n00", 1, ("p2",)), ("a-n01", 1, ("p1",))]
    assert not plan.released


def test_scale_down_releases_slots_only_once_pods_are_gone() -> None:
    held = record(*((f"a-n0{i}", 1, (f"p{i}",)) for i in range(4)))
    live = [pod(f"p{i}", gated=False) for i in range(4)]
    waiting = run(live, gang=2, placement=held)
    assert len(members(waiting)) == 4 and not waiting.released  # pods still hold their slots
    assert waiting.record is not None and waiting.record.size == 2
    plan = run(live[:2], gang=2, placement=held)
    assert members(plan) == [("a-n00", 1, ("p0",)), ("a-n01", 1, ("p1",))]
    assert plan.released and plan.record is not None and plan.record.size == 2
    assert [n.reason for n in plan.notices] == ["Shrunk"]


def test_unpinned_slots_beyond_the_gang_go_from_the_emptiest_nodes_first() -> None:
    held = record(("a-n00", 2, ("p0",)), ("a-n01", 2, ()), gpus_per_pod=2)
    plan = run([pod("p0", gated=False, gpus=2)], gang=2, placement=held)
    assert members(plan) == [("a-n00", 2, ("p0",))]


def test_an_unpinned_slot_on_a_failed_node_moves_to_a_healthy_node_of_the_clique() -> None:
    held = record(("a-n00", 1, ("p0",)), ("a-n01", 1, ()))
    nodes = [node("a-n00"), node("a-n01", ready="False"), node("a-n02"), *RACK_B]
    plan = run([pod("p0", gated=False), pod("p1")], gang=2, placement=held, nodes=nodes)
    assert members(plan) == [("a-n00", 1, ("p0",)), ("a-n02", 1, ("p1",))]
    assert plan.pins == (Pin(pod="p1", node="a-n02"),)
    assert plan.released  # the failed node's slot went back


def test_a_replacement_waits_when_its_clique_has_no_healthy_room() -> None:
    held = record(("a-n00", 1, ("p0",)), ("a-n01", 1, ()))
    nodes = [node("a-n00"), node("a-n01", taints=[_fault()]), *RACK_B]
    plan = run([pod("p0", gated=False), pod("p1")], gang=2, placement=held, nodes=nodes)
    assert members(plan) == [("a-n00", 1, ("p0",))]  # never moves to the empty rack B
    assert plan.waiting and plan.pins == ()
    (hold,) = plan.holds
    assert (hold.pod, hold.reason) == ("p1", "CliqueFull")
    assert CLIQUE_A in hold.message


def test_a_gang_that_fits_nowhere_waits_with_the_engines_reason() -> None:
    busy = record(*((f"a-n0{i}", 1, ()) for i in range(4)))
    cluster = view(RACK_A, other=busy)
    plan = run([pod("p0"), pod("p1")], cluster=cluster, nodes=RACK_A)
    assert plan.action == "keep" and plan.record is None and plan.waiting
    assert [(h.pod, h.reason) for h in plan.holds] == [
        ("p0", "InsufficientCapacity"),
        ("p1", "InsufficientCapacity"),
    ]
    assert plan.holds[0].message == "no clique has 4 nodes with 4 free GPUs: best clique " + (
        CLIQUE_A + " has 0"
    )
    assert [n.type for n in plan.notices] == ["Warning"]
    # Pods that already say so get no second write, and no second Event.
    told = [
        pod(p, placed=("False", h.reason, h.message))
        for p, h in (("p0", plan.holds[0]), ("p1", plan.holds[1]))
    ]
    again = run(told, cluster=cluster, nodes=RACK_A)
    assert again.holds == () and again.notices == () and again.waiting


def test_a_pod_that_waited_is_marked_placed_when_pinned() -> None:
    plan = run([pod("p0", placed=("False", "InsufficientCapacity", "no room"))], gang=1)
    assert plan.pins == (Pin(pod="p0", node="a-n00", waited=True),)


def test_pods_beyond_the_gang_wait_for_a_slot() -> None:
    plan = run([pod("p0"), pod("p1"), pod("p2")], gang=2)
    assert [p.pod for p in plan.pins] == ["p0", "p1"]
    (hold,) = plan.holds
    assert (hold.pod, hold.reason) == ("p2", "GangComplete")
    assert not plan.waiting  # it waits for a pod to end, not for capacity


def test_pods_of_different_sizes_are_refused() -> None:
    plan = run([pod("p0", gpus=4), pod("p1", gpus=2)])
    assert plan.record is None
    assert {h.reason for h in plan.holds} == {"InvalidRequest"}
    held = record(("a-n00", 1, ("p0",)))
    plan = run([pod("p0", gated=False), pod("p1", gpus=2)], gang=2, placement=held)
    assert [(h.pod, h.reason) for h in plan.holds] == [("p1", "InvalidRequest")]


def test_spec_gang_nodes_spreads_the_gang() -> None:
    plan = run([pod(f"p{i}", gpus=1) for i in range(4)], cd=domain(spread=4))
    assert [m[1] for m in members(plan)] == [1, 1, 1, 1]


def test_nvidias_num_nodes_neither_spreads_nor_refuses_a_gang() -> None:
    """NVIDIA's driver reads numNodes only for its global status (docs/domain-controller.md)."""
    packed = run([pod(f"p{i}", gpus=1) for i in range(4)], cd=domain(num_nodes=4))
    assert [m[1] for m in members(packed)] == [4]
    more_pods_than_nodes = run([pod(f"p{i}") for i in range(4)], cd=domain(num_nodes=2))
    assert more_pods_than_nodes.action == "write" and len(more_pods_than_nodes.pins) == 4


def test_an_unknown_size_waits_but_repins_what_was_recorded() -> None:
    held = record(("a-n00", 1, ("p0",)))
    plan = run([pod("p0"), pod("p1")], gang=UnknownSize(message="?"), placement=held)
    assert plan.unknown_size and plan.action == "keep"
    assert plan.pins == (Pin(pod="p0", node="a-n00"),)


def test_deletion_keeps_the_record_while_pods_use_the_claims() -> None:
    held = record(("a-n00", 1, ("p0",)))
    deleting = domain(deleting=True)
    assert run([pod("p0", gated=False)], placement=held, cd=deleting) == Plan()
    plan = run([pod("p0", gated=False, phase="Failed")], placement=held, cd=deleting)
    assert plan.action == "delete" and plan.released
    assert [n.reason for n in plan.notices] == ["PlacementDeleted"]


def test_a_domain_that_is_gone_loses_its_record() -> None:
    held = record(("a-n00", 1, ("p0",)))
    plan = plan_domain(
        key="default/train",
        domain=None,
        placement=held,
        pods=[],
        gang=GangSize(pods=0, source=""),
        view=view(RACK_A, train=held),
    )
    assert plan.action == "delete" and plan.notices == ()


def _fault() -> dict[str, str]:
    return {"key": "cdo.dev/gpu-fault", "value": "xid-79", "effect": "NoSchedule"}


def test_a_pod_terminating_on_a_failed_node_gives_its_slot_to_the_replacement() -> None:
    held = record(("a-n00", 1, ("p0",)), ("a-n01", 1, ("p1",)))
    nodes = [node("a-n00"), node("a-n01", ready="Unknown"), node("a-n02"), *RACK_B]
    stuck = pod("p1", gated=False, deleting=True, phase="Running", node_name="a-n01")
    plan = run([pod("p0", gated=False), stuck, pod("p2")], gang=2, placement=held, nodes=nodes)
    assert members(plan) == [("a-n00", 1, ("p0",)), ("a-n02", 1, ("p2",))]
    # On a healthy node a terminating pod keeps its slot until it is gone.
    healthy = run([pod("p0", gated=False), stuck, pod("p2")], gang=2, placement=held, nodes=RACK_A)
    assert members(healthy) == [("a-n00", 1, ("p0",)), ("a-n01", 1, ("p1",))]
    assert [h.reason for h in healthy.holds] == ["GangComplete"]
