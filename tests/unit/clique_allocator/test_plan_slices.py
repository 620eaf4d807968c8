"""The plan of a domain larger than a clique: slices, ranks, growth, shrinking, faults, upgrade."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from services.clique_allocator.gang import GangSize
from services.clique_allocator.placement import ClusterView
from services.clique_allocator.plan import plan_domain
from services.clique_allocator.planning.outcome import Plan
from shared.crds.computedomain import ComputeDomain
from shared.crds.placement import PlacementSpec
from shared.kube.models import Node, Pod

from .builders import CLIQUE_A, CLIQUE_B, domain, legacy_record, node, pod, rack, view

INDEX = "batch.kubernetes.io/job-completion-index"
RACKS = rack("a", CLIQUE_A) + rack("b", CLIQUE_B)  # two cliques of 4 nodes x 4 GPUs


def job_pod(index: int, *, gpus: int = 4, created: int = 0, **fields: object) -> Pod:
    """A pod of Indexed Job ``train`` with completion index ``index``."""
    return pod(
        f"train-{index}-x{(7 * index) % 10}",  # names that do not sort by index
        gpus=gpus,
        labels={INDEX: str(index)},
        owner=("Job", "train", "job-uid"),
        created=created,
        **fields,  # type: ignore[arg-type]
    )


def run(
    pods: Sequence[Pod],
    *,
    gang: int,
    placement: PlacementSpec | None = None,
    cd: ComputeDomain | None = None,
    nodes: list[Node] | None = None,
    cluster: ClusterView | None = None,
) -> Plan:
    records = {"train": placement} if placement is not None else {}
    ranks = {
        p.metadata.name: int(p.metadata.labels[INDEX]) for p in pods if INDEX in p.metadata.labels
    }
    return plan_domain(
        key="default/train",
        domain=cd or domain(),
        placement=placement,
        pods=pods,
        gang=GangSize(pods=gang, source="Job train"),
        view=cluster or view(RACKS if nodes is None else nodes, **records),
        ranks=ranks,
    )


def ranks_by_slice(plan: Plan) -> dict[int, list[int]]:
    assert plan.record is not None
    return {
        piece.index: sorted(p.rank for m in piece.members for p in m.pods)
        for piece in plan.record.slices
    }


def nodes_by_pod(plan: Plan) -> Mapping[str, str]:
    return {pin.pod: pin.node for pin in plan.pins}


def placed_pods(plan: Plan) -> dict[str, str]:
    """Every seated pod's node in the plan's record."""
    assert plan.record is not None
    return {p.name: m.node for piece in plan.record.slices for m in piece.members for p in m.pods}


def test_a_sliced_job_keeps_consecutive_ranks_in_each_slice_and_clique() -> None:
    pods = [job_pod(i, created=(5 * i) % 8) for i in range(8)]

    plan = run(pods, gang=8, cd=domain(slice_size=4))

    assert plan.record is not None
    assert [(s.index, s.clique, s.channel, s.first_rank, s.size) for s in plan.record.slices] == [
        (0, CLIQUE_A, 0, 0, 4),
        (1, CLIQUE_B, 0, 4, 4),
    ]
    assert ranks_by_slice(plan) == {0: [0, 1, 2, 3], 1: [4, 5, 6, 7]}
    pinned = nodes_by_pod(plan)
    for p in pods:
        index = int(p.metadata.labels[INDEX])
        assert pinned[p.metadata.name].startswith("a-" if index < 4 else "b-")
    # Ranks follow the tray slots inside a slice.
    assert [pinned[job_pod(i).metadata.name] for i in range(4)] == [f"a-n0{i}" for i in range(4)]
    assert plan.notices[0].message.startswith("reserved 8 pods of 4 GPUs on 2 slices (slice 0")


def test_a_smaller_last_slice_takes_the_ranks_that_are_left() -> None:
    plan = run([job_pod(i) for i in range(6)], gang=6, cd=domain(slice_size=4))

    assert plan.record is not None
    assert [(s.first_rank, s.size) for s in plan.record.slices] == [(0, 4), (4, 2)]
    assert ranks_by_slice(plan) == {0: [0, 1, 2, 3], 1: [4, 5]}


def test_without_a_slice_size_a_gang_larger_than_a_clique_takes_the_fewest_slices() -> None:
    plan = run([pod(f"p{i}", created=i) for i in range(8)], gang=8)

    assert plan.record is not None
    assert [(s.clique, s.size) for s in plan.record.slices] == [(CLIQUE_A, 4), (CLIQUE_B, 4)]
    # Pods without an index fill the slices in creation order.
    assert ranks_by_slice(plan) == {0: [0, 1, 2, 3], 1: [4, 5, 6, 7]}
    assert {placed_pods(plan)[f"p{i}"][0] for i in range(4)} == {"a"}


def test_a_gang_that_fits_one_clique_is_never_cut() -> None:
    busy = [node("a-n00"), *rack("b", CLIQUE_B)]  # clique A has 1 node: B takes the 4 pods
    plan = run([pod(f"p{i}") for i in range(4)], gang=4, nodes=busy)

    assert plan.record is not None
    assert [s.clique for s in plan.record.slices] == [CLIQUE_B]


def test_a_gang_larger_than_the_cluster_waits_and_reserves_nothing() -> None:
    plan = run([job_pod(i) for i in range(9)], gang=9)

    assert plan.action == "keep" and plan.record is None and plan.waiting
    assert {h.reason for h in plan.holds} == {"LargerThanCluster"}
    assert plan.pins == ()


def test_growth_fills_the_last_slice_then_opens_a_new_one() -> None:
    # Four 2-GPU pods in clique A (2 nodes), a gang larger than a clique (8 pods of 2 GPUs fit
    # one clique of 16 GPUs, so the gang is 12).
    first = run([job_pod(i, gpus=2) for i in range(4)], gang=4)
    assert first.record is not None and len(first.record.slices) == 1
    running = [
        job_pod(i, gpus=2, gated=False, pinned_to=placed_pods(first)[job_pod(i).metadata.name])
        for i in range(4)
    ]

    grown = run(
        [*running, *(job_pod(i, gpus=2) for i in range(4, 12))], gang=12, placement=first.record
    )

    assert grown.record is not None
    assert [(s.clique, s.first_rank, s.size) for s in grown.record.slices] == [
        (CLIQUE_A, 0, 8),
        (CLIQUE_B, 8, 4),
    ]
    assert ranks_by_slice(grown) == {0: list(range(8)), 1: [8, 9, 10, 11]}
    assert [n.reason for n in grown.notices] == ["Grown"]


def test_shrinking_releases_the_highest_ranks_and_then_the_empty_slice() -> None:
    placed = run([job_pod(i) for i in range(8)], gang=8, cd=domain(slice_size=4))
    assert placed.record is not None
    where = placed_pods(placed)
    alive = [
        job_pod(i, gated=False, pinned_to=where[job_pod(i).metadata.name], phase="Running")
        for i in range(4)
    ]

    shrunk = run(alive, gang=4, placement=placed.record, cd=domain(slice_size=4))

    assert shrunk.record is not None
    assert [(s.index, s.clique, s.size) for s in shrunk.record.slices] == [(0, CLIQUE_A, 4)]
    assert shrunk.released
    assert [n.reason for n in shrunk.notices] == ["Shrunk"]


def test_a_fault_in_one_slice_is_replaced_there_and_leaves_the_other_alone() -> None:
    nodes = [*rack("a", CLIQUE_A), *rack("b", CLIQUE_B, count=5)]
    placed = run([job_pod(i) for i in range(8)], gang=8, cd=domain(slice_size=4), nodes=nodes)
    assert placed.record is not None
    where = placed_pods(placed)
    victim = job_pod(5).metadata.name
    failed = where[victim]
    survivors = [
        job_pod(i, gated=False, pinned_to=where[job_pod(i).metadata.name], phase="Running")
        for i in range(8)
        if i != 5
    ]
    broken = [
        n if n.metadata.name != failed else node(failed, clique=CLIQUE_B, ready="False")
        for n in nodes
    ]
    replacement = job_pod(5, created=60, uid="a-new-pod-of-the-same-name")

    plan = run(
        [*survivors, replacement],
        gang=8,
        placement=placed.record,
        cd=domain(slice_size=4),
        nodes=broken,
    )

    assert plan.record is not None
    assert plan.record.slices[0] == placed.record.slices[0]
    landed = nodes_by_pod(plan)[replacement.metadata.name]
    assert landed.startswith("b-") and landed != failed
    assert ranks_by_slice(plan)[1] == [4, 5, 6, 7]


def test_a_record_of_the_first_release_is_honoured_and_rewritten_in_slices() -> None:
    old = legacy_record(
        ("a-n00", 1, ("train-1-x7",)),
        ("a-n01", 1, ("train-0-x0",)),
        ("a-n02", 1, ()),
        ("a-n03", 1, ()),
        size=4,
    )
    alive = [
        job_pod(1, gated=False, pinned_to="a-n00", phase="Running"),
        job_pod(0, gated=False, pinned_to="a-n01", phase="Running"),
    ]

    plan = run([*alive, job_pod(2), job_pod(3)], gang=4, placement=old)

    assert plan.action == "write" and plan.record is not None
    (piece,) = plan.record.slices
    assert (piece.clique, piece.channel, piece.size) == (CLIQUE_A, 0, 4)
    assert placed_pods(plan)["train-1-x7"] == "a-n00" and placed_pods(plan)["train-0-x0"] == "a-n01"
    assert ranks_by_slice(plan) == {0: [0, 1, 2, 3]}
    ranks = {p.name: p.rank for m in piece.members for p in m.pods}
    assert ranks["train-1-x7"] == 1 and ranks["train-0-x0"] == 0  # the pods' own indexes
    assert sorted(nodes_by_pod(plan).values()) == ["a-n02", "a-n03"]
