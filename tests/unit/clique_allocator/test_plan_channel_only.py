"""Pods that ask for no GPU, only their domain's channel: where the plan seats them, and why one
waits (``planning/channelonly.py``)."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from services.clique_allocator.eligibility import node_limits
from services.clique_allocator.gang import GangSize, UnknownSize
from services.clique_allocator.needs import gang_needs
from services.clique_allocator.nodes import node_facts
from services.clique_allocator.placement import MAX_CHANNELS, ClusterView, NodeLimits
from services.clique_allocator.plan import gpu_ranks, plan_domain
from services.clique_allocator.plan_units import plan_units
from services.clique_allocator.planning.channelonly import (
    NO_CHANNEL_AVAILABLE,
    WAITING_FOR_GPU_PODS,
    ChannelRoom,
    plan_channel_only,
)
from services.clique_allocator.planning.outcome import Pin, Plan
from services.clique_allocator.units import split_units, unit_asks
from shared.crds.computedomain import ComputeDomain
from shared.crds.placement import PlacementSlice, PlacementSpec, PodRef, SliceMember
from shared.kube.models import Node, Pod

from .builders import CLIQUE_A, CLIQUE_B, domain, node, pod, rack, record, view

RACK_A = rack("a", CLIQUE_A)
RACK_B = rack("b", CLIQUE_B)
EIGHT = {f"{r}-n{i:02d}": 8 for r in "ab" for i in range(4)}
"""Every node's cdo slice lists 8 attachment devices, none held."""


def bare(name: str = "smoke", **fields: object) -> Pod:
    """A pod whose only claim is the domain's channel (no GPU, no owner)."""
    return pod(name, gpus=0, owner=None, **fields)  # type: ignore[arg-type]


def run(
    pods: Sequence[Pod],
    *,
    gang: int | UnknownSize = 0,
    placement: PlacementSpec | None = None,
    cd: ComputeDomain | None = None,
    nodes: list[Node] | None = None,
    cluster: ClusterView | None = None,
    room: ChannelRoom | None = None,
    limits: NodeLimits | None = None,
    nodes_without_nvlink: int = 0,
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
        room=lambda: room or ChannelRoom(free=EIGHT),
        limits=(lambda gpus: limits if gpus == 0 else None) if limits is not None else None,
        nodes_without_nvlink=nodes_without_nvlink,
    )


def seats(spec: PlacementSpec | None) -> list[tuple[int, str, int, tuple[str, ...]]]:
    """(slice, node, GPUs, pods without GPUs) of every member holding such pods."""
    assert spec is not None
    return [
        (piece.index, m.node, m.gpus, tuple(ref.name for ref in m.channel_only_pods))
        for piece in spec.all_slices
        for m in piece.members
        if m.channel_only_pods
    ]


# -- a domain of such pods only ------------------------------------------------------------------


def test_nvidias_smoke_pod_alone_gets_a_clique_a_channel_and_a_node() -> None:
    plan = run([bare()])
    spec = plan.record
    assert plan.action == "write" and spec is not None
    assert (spec.gpus_per_pod, spec.size, spec.channel_only) == (0, 0, 1)
    (piece,) = spec.slices
    assert (piece.index, piece.clique, piece.channel, piece.size) == (0, CLIQUE_A, 0, 0)
    assert seats(spec) == [(0, "a-n00", 0, ("smoke",))]
    assert plan.pins == (Pin(pod="smoke", node="a-n00"),)
    assert plan.holds == ()
    # The channel is the domain's in that clique: the view holds it, so no other domain gets it.
    (reservation,) = plan.reservations
    assert (reservation.clique, reservation.channel, reservation.shares) == (CLIQUE_A, 0, ())
    after = view(RACK_A + RACK_B).with_domain("default/train", plan.reservations)
    state = after.clique(CLIQUE_A)
    assert state is not None and state.channel_for("default/other") == 1


def test_the_clique_with_the_most_room_is_chosen_and_its_pods_share_a_node() -> None:
    # Rack A's nodes have 1 free device each, rack B's 2.
    room = ChannelRoom(
        free={**{f"a-n{i:02d}": 1 for i in range(4)}, **{f"b-n{i:02d}": 2 for i in range(4)}}
    )
    plan = run([bare("h0"), bare("h1"), bare("h2")], room=room)
    assert plan.record is not None and plan.record.slices[0].clique == CLIQUE_B
    # A node the domain already uses comes first: h1 joins h0, h2 goes on when it is full.
    assert seats(plan.record) == [(0, "b-n00", 0, ("h0", "h1")), (0, "b-n01", 0, ("h2",))]


def test_a_seated_pod_keeps_its_seat_and_its_gone_pod_frees_it_but_not_the_channel() -> None:
    first = run([bare()])
    assert first.record is not None
    running = bare(gated=False, node_name="a-n00", pinned_to="a-n00", phase="Running")
    again = run([running], placement=first.record)
    assert again.action == "keep" and again.pins == ()
    gone = run([], placement=first.record)
    assert gone.action == "write" and gone.released
    assert gone.record is not None
    (piece,) = gone.record.slices
    assert (piece.clique, piece.channel, piece.members, gone.record.channel_only) == (
        CLIQUE_A,
        0,
        (),
        0,
    )


def test_a_recreated_pod_of_the_same_name_is_another_pod() -> None:
    first = run([bare()])
    assert first.record is not None
    recreated = run([bare(uid="new-uid")], placement=first.record)
    assert recreated.record is not None
    assert seats(recreated.record) == [(0, "a-n00", 0, ("smoke",))]
    (seated,) = recreated.record.slices[0].members[0].channel_only_pods
    assert seated.uid == "new-uid"


def test_gpu_pods_that_come_later_grow_the_slice_in_its_clique() -> None:
    only = PlacementSpec(
        gpus_per_pod=0,
        size=0,
        channel_only=1,
        slices=(
            PlacementSlice(
                index=0,
                clique=CLIQUE_B,
                channel=3,
                members=(
                    SliceMember(
                        node="b-n02", slot=2, channel_only_pods=(PodRef(name="h", uid="h-uid"),)
                    ),
                ),
            ),
        ),
    )
    helper = bare("h", gated=False, node_name="b-n02", pinned_to="b-n02", phase="Running")
    plan = run([helper, pod("w0", gpus=4), pod("w1", gpus=4)], gang=2, placement=only)
    spec = plan.record
    assert plan.action == "write" and spec is not None
    assert (spec.gpus_per_pod, spec.size, spec.channel_only) == (4, 2, 1)
    (piece,) = spec.slices
    assert (piece.clique, piece.channel) == (CLIQUE_B, 3)
    assert {p.pod: p.node for p in plan.pins} == {"w0": "b-n00", "w1": "b-n01"}
    assert seats(spec) == [(0, "b-n02", 0, ("h",))]


# -- beside pods that take GPUs ------------------------------------------------------------------


def test_a_coordinator_joins_its_gangs_clique_and_channel_on_a_node_the_gang_uses() -> None:
    pods = [pod("w0", gpus=1), pod("w1", gpus=1), bare("coordinator")]
    plan = run(pods, gang=2)
    spec = plan.record
    assert spec is not None
    assert (spec.gpus_per_pod, spec.size, spec.channel_only) == (1, 2, 1)
    (piece,) = spec.slices
    assert (piece.clique, piece.channel) == (CLIQUE_A, 0)
    # Both GPU pods share a-n00 (best fit); the coordinator takes a device of that node.
    assert [(m.node, m.gpus, len(m.pods)) for m in piece.members] == [("a-n00", 2, 2)]
    assert seats(spec) == [(0, "a-n00", 2, ("coordinator",))]
    assert {p.pod: p.node for p in plan.pins} == {
        "w0": "a-n00",
        "w1": "a-n00",
        "coordinator": "a-n00",
    }


def test_the_gang_reserves_gpus_for_its_gpu_pods_only() -> None:
    # Rack A has room for exactly 4 pods of 4 GPUs: the coordinator takes none of it.
    pods = [*(pod(f"w{i}") for i in range(4)), bare("coordinator")]
    plan = run(pods, gang=4, nodes=RACK_A)
    assert plan.record is not None and plan.record.size == 4
    assert plan.holds == ()
    assert len(plan.pins) == 5


def test_a_member_without_free_devices_sends_the_pod_to_another_node_of_the_clique() -> None:
    placed = record(("a-n00", 2, ("w0", "w1")), gpus_per_pod=1)
    workers = [pod(f"w{i}", gpus=1, gated=False, pinned_to="a-n00") for i in range(2)]
    room = ChannelRoom(free={**EIGHT, "a-n00": 0})
    plan = run([*workers, bare("coordinator")], gang=2, placement=placed, room=room)
    assert plan.record is not None
    assert seats(plan.record) == [(0, "a-n01", 0, ("coordinator",))]
    assert plan.pins == (Pin(pod="coordinator", node="a-n01"),)
    # A node that holds only pods without GPUs is a member with its slot.
    member = next(m for m in plan.record.slices[0].members if m.node == "a-n01")
    assert (member.slot, member.gpus, member.pods) == (1, 0, ())


def test_a_coordinator_waits_for_its_gangs_gpu_pods_to_be_placed() -> None:
    busy = record(*((f"a-n0{i}", 1, ()) for i in range(4)))
    cluster = view(RACK_A, other=busy)
    pods = [pod("w0"), pod("w1"), bare("coordinator")]
    plan = run(pods, gang=2, cluster=cluster, nodes=RACK_A)
    assert plan.record is None and plan.waiting
    held = {h.pod: h for h in plan.holds}
    assert held["w0"].reason == "InsufficientCapacity"
    assert held["coordinator"].reason == WAITING_FOR_GPU_PODS
    assert held["coordinator"].message.startswith(
        "this pod asks for no GPU: it goes to a clique the domain's pods that take GPUs are "
        "placed in, and none of them is placed yet (InsufficientCapacity: no clique has"
    )
    # Before the workload's GPU pods exist at all, it waits the same way.
    alone = run([bare("coordinator")], gang=2)
    assert [(h.pod, h.reason) for h in alone.holds] == [("coordinator", WAITING_FOR_GPU_PODS)]
    assert alone.record is None


def test_a_pod_whose_claims_are_not_all_known_is_left_for_the_next_look() -> None:
    pending = pod("later", gpus=0, owner=None)
    plan = plan_domain(
        key="default/train", domain=domain(), placement=None, pods=[pending],
        gang=GangSize(pods=0, source=""), view=view(RACK_A),
        channel_only=lambda found: False,
    )  # fmt: skip
    assert plan.unknown_size and plan.record is None and plan.pins == () and plan.holds == ()


# -- no room ---------------------------------------------------------------------------------------


def test_no_free_attachment_device_anywhere_waits_with_a_reason_that_says_so() -> None:
    room = ChannelRoom(free=dict.fromkeys(EIGHT, 0))
    plan = run([bare()], room=room)
    assert plan.record is None and plan.action == "keep" and plan.waiting
    (held,) = plan.holds
    assert held.reason == NO_CHANNEL_AVAILABLE
    assert held.message == (
        "no clique can give this pod, which asks for no GPU, the domain's IMEX channel on a node "
        f"with a free attachment device: in clique {CLIQUE_A}, 4 nodes have no free IMEX channel "
        f"attachment device; in clique {CLIQUE_B}, 4 nodes have no free IMEX channel attachment "
        "device"
    )
    assert [(n.type, n.reason) for n in plan.notices] == [("Warning", NO_CHANNEL_AVAILABLE)]
    told = bare(placed=("False", held.reason, held.message))
    again = run([told], room=room)
    assert again.holds == () and again.notices == () and again.waiting


def test_no_free_channel_in_the_only_clique_with_room_waits_with_a_reason_that_says_so() -> None:
    full = {f"d{i}": record(("a-n00", 0, ()), channel=i) for i in range(MAX_CHANNELS)}
    cluster = view(RACK_A, **full)
    plan = run([bare()], cluster=cluster, nodes=RACK_A)
    (held,) = plan.holds
    assert held.reason == NO_CHANNEL_AVAILABLE
    assert held.message.endswith(
        f"clique {CLIQUE_A} has all {MAX_CHANNELS} IMEX channels in use, and no other has a "
        "node with room"
    )


def test_a_mixed_domains_clique_without_room_names_why_its_nodes_cannot_take_the_pod() -> None:
    placed = record(("a-n00", 1, ("w0",)), gpus_per_pod=4)
    worker = pod("w0", gated=False, pinned_to="a-n00")
    unhealthy = [*RACK_A[:3], node("a-n03", ready="False")]
    room = ChannelRoom(free={**EIGHT, "a-n00": 0, "a-n01": 0, "a-n02": 0})
    plan = run([worker, bare("coordinator")], gang=1, placement=placed, room=room, nodes=unhealthy)
    (held,) = plan.holds
    assert held.reason == NO_CHANNEL_AVAILABLE and plan.waiting
    assert held.message == (
        "no node can take this pod, which asks for no GPU but needs the domain's IMEX channel "
        f"and a free attachment device, in the domain's clique {CLIQUE_A}: in clique "
        f"{CLIQUE_A}, 3 nodes have no free IMEX channel attachment device, 1 node takes no new "
        "pods"
    )
    # The record counts the pod that waits.
    assert plan.record is not None and plan.record.channel_only == 1


def test_the_pods_own_constraints_are_named_when_they_rule_out_every_node() -> None:
    picky = bare(spec_extra={"nodeSelector": {"example.com/pool": "nowhere"}})
    facts = [f for item in RACK_A + RACK_B if (f := node_facts(item)) is not None]
    limits = node_limits(
        gang_needs([picky], pin_label="kubernetes.io/hostname"),
        nodes=facts,
        others={},
        gpus_per_pod=0,
    )
    plan = run([picky], limits=limits)
    (held,) = plan.holds
    assert held.reason == NO_CHANNEL_AVAILABLE
    assert "4 nodes are ruled out by the pod's constraints" in held.message
    assert held.message.endswith(
        f"(the pod's constraints: 4 nodes of clique {CLIQUE_A} do not match the pods' node "
        f"selector or node affinity; 4 nodes of clique {CLIQUE_B} do not match the pods' node "
        "selector or node affinity)"
    )


def test_without_any_clique_a_domain_of_such_pods_runs_without_imex() -> None:
    plan = run([bare()], nodes=[], nodes_without_nvlink=1)
    assert plan.record is not None and not plan.record.multi_node_nvlink
    assert plan.pins == (Pin(pod="smoke", node=""),)
    assert [n.reason for n in plan.notices] == ["PlacedWithoutNvlink"]
    nowhere = run([bare()], nodes=[])
    (held,) = nowhere.holds
    assert held.message.endswith(": the cluster has no NVLink clique")


# -- release -------------------------------------------------------------------------------------


def test_a_pod_whose_slice_moved_to_another_clique_is_evicted_and_listed() -> None:
    before = PlacementSpec(
        gpus_per_pod=4,
        size=1,
        channel_only=1,
        slices=(
            PlacementSlice(
                index=0,
                clique=CLIQUE_A,
                channel=0,
                size=1,
                members=(
                    SliceMember(
                        node="a-n00", slot=0, channel_only_pods=(PodRef(name="h", uid="h-uid"),)
                    ),
                ),
            ),
        ),
    )
    moved = msgspec.structs.replace(
        before,
        channel_only=0,
        slices=(PlacementSlice(index=0, clique=CLIQUE_B, channel=0, size=1),),
    )
    running = bare("h", gated=False, node_name="a-n00", pinned_to="a-n00", phase="Running")
    step = plan_channel_only(
        key="default/train", record=moved, before=before, pods=[running], gpu_gang=1,
        gpu_wait="", view=view(RACK_A + RACK_B), room=ChannelRoom(free=EIGHT), limits=None,
        slot_of=lambda name: 0,
    )  # fmt: skip
    assert step.evictions == ("h",) and step.released
    assert step.record is not None
    assert step.record.evicting == (PodRef(name="h", uid="h-uid"),)
    assert seats(step.record) == []
    # Its replacement (another uid) is seated in the slice's new clique once it is gone.
    again = plan_channel_only(
        key="default/train", record=moved, before=step.record, pods=[bare("h", uid="h2")],
        gpu_gang=1, gpu_wait="", view=view(RACK_A + RACK_B), room=ChannelRoom(free=EIGHT),
        limits=None, slot_of=lambda name: int(name[-2:]),
    )  # fmt: skip
    assert again.record is not None and again.record.evicting == ()
    assert seats(again.record) == [(0, "b-n00", 0, ("h",))]


# -- gang units ----------------------------------------------------------------------------------


def in_units(pods: Sequence[Pod], *, size: int) -> Plan:
    """The plan of a domain whose units are the values of the pods' label ``team``, each of
    ``size`` pods (spec.gang.size)."""
    units = split_units(pods, unit_label="team")
    asks = unit_asks(
        units, recorded={}, explicit=size, unit_label="team", namespace="default",
        template="train-rct", workload=lambda *_: None, jobset_jobs=lambda *_: (),
        ranks_of=lambda found: {},
    )  # fmt: skip
    return plan_units(
        key="default/train", domain=domain(gang=size, unit_label="team"), placement=None,
        units=asks, view=view(RACK_A + RACK_B), gpus_of=lambda p: p.gpus("nvidia.com/gpu"),
        room=lambda: ChannelRoom(free=EIGHT),
    )  # fmt: skip


def test_each_gang_unit_seats_its_own_pods_without_gpus_on_its_own_channel() -> None:
    pods = [pod(f"w-{team}", labels={"team": team}) for team in "ab"] + [
        bare(f"h-{team}", labels={"team": team}) for team in "ab"
    ]
    spec = in_units(pods, size=2).record
    assert spec is not None and spec.channel_only == 2
    by_unit = {piece.unit: piece for piece in spec.slices}
    # One pod with GPUs per unit (spec.gang.size 2 less the unit's pod without GPUs).
    assert {unit: piece.size for unit, piece in by_unit.items()} == {"a": 1, "b": 1}
    assert {(p.clique, p.channel) for p in by_unit.values()} == {(CLIQUE_A, 0), (CLIQUE_A, 1)}
    for team, piece in by_unit.items():
        assert [ref.name for m in piece.members for ref in m.channel_only_pods] == [f"h-{team}"]


def test_a_unit_of_pods_without_gpus_beside_units_with_gpus_keeps_their_gpu_slots() -> None:
    # Unit "a" is one pod without GPUs (sorted first), unit "b" one pod of 4 GPUs.
    pods = [bare("h-a", labels={"team": "a"}), pod("w-b", labels={"team": "b"})]
    spec = in_units(pods, size=1).record
    assert spec is not None and spec.gpus_per_pod == 4 and spec.reserved_pods == 1
    by_unit = {piece.unit: piece for piece in spec.slices}
    assert [ref.name for m in by_unit["a"].members for ref in m.channel_only_pods] == ["h-a"]
    assert [p.name for m in by_unit["b"].members for p in m.pods] == ["w-b"]


def test_an_lws_leader_without_gpus_holds_no_rank_and_its_workers_rank_from_0() -> None:
    ranks = {"serve-0": 0, "serve-0-1": 1, "serve-0-2": 2, "serve-0-3": 3}
    leader = bare("serve-0")
    assert gpu_ranks(ranks, [leader]) == {"serve-0-1": 0, "serve-0-2": 1, "serve-0-3": 2}
    assert gpu_ranks(ranks, []) == ranks
    workers = [pod(f"serve-0-{w}", gpus=4) for w in (1, 2, 3)]
    plan = plan_domain(
        key="default/train", domain=domain(), placement=None, pods=[leader, *workers],
        gang=GangSize(pods=3, source="LeaderWorkerSet group serve-0: 4, less 1 without GPUs"),
        view=view(RACK_A), ranks=ranks, room=lambda: ChannelRoom(free=EIGHT),
    )  # fmt: skip
    assert plan.record is not None
    ranked = {p.name: p.rank for m in plan.record.slices[0].members for p in m.pods}
    assert ranked == {"serve-0-1": 0, "serve-0-2": 1, "serve-0-3": 2}
    assert seats(plan.record) == [(0, "a-n00", 4, ("serve-0",))]
