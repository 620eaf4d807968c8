"""Gang units: LeaderWorkerSet groups and spec.gang.unitLabel, each placed as a gang of its own;
JobSet gangs and kinds cdo cannot size."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from services.clique_allocator.gang import (
    GANG_SIZE_UNDECLARED,
    GangSize,
    UndeclaredSize,
    UnknownSize,
    gang_size,
    less_channel_only,
)
from services.clique_allocator.objects import Workload
from services.clique_allocator.plan import plan_domain
from services.clique_allocator.plan_units import plan_units
from services.clique_allocator.planning.outcome import Plan
from services.clique_allocator.planning.unitrecords import merge_units, unit_specs
from services.clique_allocator.ranks import LWS_GROUP_INDEX, LWS_SIZE, LWS_WORKER_INDEX
from services.clique_allocator.units import (
    LWS_NAME,
    GroupShape,
    has_units,
    lws_group,
    split_units,
    unit_asks,
)
from shared.crds.computedomain import ComputeDomain
from shared.crds.placement import PlacementSpec
from shared.kube.models import Node, Pod

from .builders import CLIQUE_A, CLIQUE_B, domain, pod, rack, slice_of, view, workload

RACKS = rack("a", CLIQUE_A, 18) + rack("b", CLIQUE_B, 18)  # two NVL72 racks, 4 GPUs a node
TEMPLATE = "train-rct"


def lws_pod(group: int, worker: int, *, uid: str = "", lws: str = "serve") -> Pod:
    name = f"{lws}-{group}" if worker == 0 else f"{lws}-{group}-{worker}"
    owner = (lws, "leaders-uid") if worker == 0 else (f"{lws}-{group}", f"workers-{group}-uid")
    return pod(
        name,
        uid=uid,
        owner=("StatefulSet", *owner),
        labels={
            LWS_NAME: lws,
            LWS_GROUP_INDEX: str(group),
            LWS_WORKER_INDEX: str(worker),
        },
    )


def group_pods(groups: Sequence[int], size: int = 4, *, uid: str = "") -> list[Pod]:
    return [lws_pod(g, w, uid=f"{uid}{g}-{w}" if uid else "") for g in groups for w in range(size)]


def statefulsets(
    replicas: int, size: int = 4, *, leader_uses: bool = True, lws: str = "serve"
) -> dict[str, Workload]:
    """The leader StatefulSet and one worker StatefulSet per group, as LWS makes them."""
    found = {
        f"StatefulSet/{lws}": workload(
            replicas=replicas,
            uid="leaders-uid",
            makes=TEMPLATE if leader_uses else "other",
            annotations={LWS_SIZE: str(size)},
        )
    }
    for group in range(replicas):
        found[f"StatefulSet/{lws}-{group}"] = workload(
            replicas=size - 1, uid=f"workers-{group}-uid", makes=TEMPLATE
        )
    return found


def lookup(found: Mapping[str, Workload]):  # type: ignore[no-untyped-def]
    return lambda kind, namespace, name: found.get(f"{kind}/{name}")


def plan(
    pods: Sequence[Pod],
    found: Mapping[str, Workload],
    *,
    placement: PlacementSpec | None = None,
    cd: ComputeDomain | None = None,
    nodes: list[Node] | None = None,
) -> Plan:
    cd = cd or domain()
    units = split_units(pods, unit_label=cd.spec.gang.unit_label if cd.spec.gang else None)
    recorded = unit_specs(placement) if placement is not None else {}
    asks = unit_asks(
        units,
        recorded={unit: part.size for unit, part in recorded.items()},
        explicit=cd.spec.gang.size if cd.spec.gang else None,
        unit_label=cd.spec.gang.unit_label if cd.spec.gang else None,
        namespace="default",
        template=TEMPLATE,
        workload=lookup(found),
        jobset_jobs=lambda namespace, name: (),
        ranks_of=lambda pods: {},
    )
    records = {"train": placement} if placement is not None else {}
    return plan_units(
        key="default/train",
        domain=cd,
        placement=placement,
        units=asks,
        unlabelled=units.unlabelled,
        unknown=units.unknown,
        view=view(RACKS if nodes is None else nodes, **records),
        gpus_of=lambda p: p.gpus("nvidia.com/gpu"),
    )


def groups_of(record: PlacementSpec | None) -> dict[str, tuple[str, int, list[int]]]:
    """Per unit: its clique, its channel and its ranks (one slice each)."""
    assert record is not None
    found: dict[str, tuple[str, int, list[int]]] = {}
    for piece in record.slices:
        assert piece.unit not in found, f"unit {piece.unit} is in two slices"
        ranks = sorted(p.rank for m in piece.members for p in m.pods)
        found[piece.unit] = (piece.clique, piece.channel, ranks)
    return found


def test_lws_pods_split_by_group_and_wait_for_their_labels() -> None:
    pods = [*group_pods([0, 1], 2), pod("loose", owner=None)]
    unlabelled = pod("serve-2", owner=("StatefulSet", "serve", "u"), labels={LWS_NAME: "serve"})
    units = split_units([*pods, unlabelled], unit_label=None)
    assert {name: len(found) for name, found in units.pods.items()} == {
        "serve-0": 2, "serve-1": 2, "": 1,
    }  # fmt: skip
    assert units.unknown


def test_lws_pods_without_their_group_index_are_never_placed_as_one_gang() -> None:
    unlabelled = pod(
        "serve-0", owner=("StatefulSet", "serve", "leaders-uid"), labels={LWS_NAME: "serve"}
    )
    assert has_units(split_units([unlabelled], unit_label=None), ())
    result = plan([unlabelled], statefulsets(1))
    assert result.unknown_size
    assert result.record is None and not result.pins


def test_a_unit_label_groups_pods_and_refuses_those_without_it() -> None:
    pods = [pod(f"p{i}", labels={"team": "ab"[i % 2]}) for i in range(4)] + [pod("none")]
    units = split_units(pods, unit_label="team")
    assert {name: len(found) for name, found in units.pods.items()} == {"a": 2, "b": 2}
    assert [p.metadata.name for p in units.unlabelled] == ["none"]


@pytest.mark.parametrize(
    ("found", "recorded", "expected"),
    [
        pytest.param(statefulsets(6), None, GroupShape(pods=4, leader_counts=True),
                     id="leader and workers use the domain"),
        pytest.param(statefulsets(6, leader_uses=False), None,
                     GroupShape(pods=3, leader_counts=False), id="only the workers do"),
        pytest.param(statefulsets(2), None, GroupShape(pods=0, leader_counts=True),
                     id="a group beyond replicas is scaled away"),
        pytest.param({k: v for k, v in statefulsets(6).items() if k != "StatefulSet/serve-2"},
                     4, GroupShape(pods=4, leader_counts=True),
                     id="recreated: its worker StatefulSet gone, its recorded size holds"),
        pytest.param({k: v for k, v in statefulsets(6).items() if k != "StatefulSet/serve-2"},
                     None, UnknownSize(message="waiting to see the worker StatefulSet serve-2"),
                     id="new: waits for its worker StatefulSet"),
        pytest.param({}, None, UnknownSize(message="waiting to see the leader StatefulSet serve"),
                     id="waits for the leader StatefulSet"),
    ],
)  # fmt: skip
def test_an_lws_group_is_sized_from_its_statefulsets(
    found: dict[str, Workload], recorded: int | None, expected: GroupShape | UnknownSize
) -> None:
    shape = lws_group(
        "serve-2", namespace="default", template=TEMPLATE, workload=lookup(found),
        recorded=recorded,
    )  # fmt: skip
    assert shape == expected


def test_six_groups_each_in_one_clique_with_its_own_channel() -> None:
    result = plan(group_pods(range(6)), statefulsets(6))
    groups = groups_of(result.record)
    assert sorted(groups) == [f"serve-{g}" for g in range(6)]
    assert all(ranks == [0, 1, 2, 3] for _, _, ranks in groups.values())
    # 18 nodes of 4 GPUs take 4 groups of 4 pods x 4 GPUs: the groups use both racks.
    assert {clique for clique, _, _ in groups.values()} == {CLIQUE_A, CLIQUE_B}
    by_clique: dict[str, list[int]] = {}
    for clique, channel, _ in groups.values():
        by_clique.setdefault(clique, []).append(channel)
    assert all(len(set(channels)) == len(channels) for channels in by_clique.values())
    assert len(result.pins) == 24


def test_pods_rank_by_worker_index_and_a_leader_outside_the_domain_takes_none() -> None:
    workers = [p for p in group_pods([0]) if p.metadata.labels[LWS_WORKER_INDEX] != "0"]
    result = plan(workers, statefulsets(1, leader_uses=False))
    assert groups_of(result.record)["serve-0"][2] == [0, 1, 2]


def placed(pods: Sequence[Pod], found: Mapping[str, Workload]) -> PlacementSpec:
    result = plan(pods, found)
    assert result.record is not None
    return result.record


def test_scaling_down_releases_whole_groups_and_keeps_the_others_in_place() -> None:
    before = placed(group_pods(range(6)), statefulsets(6))
    after = plan(group_pods(range(3)), statefulsets(3), placement=before)
    assert after.released
    kept = groups_of(after.record)
    assert sorted(kept) == ["serve-0", "serve-1", "serve-2"]
    assert all(kept[unit] == groups_of(before)[unit] for unit in kept)
    # The slices keep their indices.
    indices = {p.unit: p.index for p in before.slices}
    assert after.record is not None
    assert all(indices[p.unit] == p.index for p in after.record.slices)


def test_scaling_up_adds_groups_without_moving_the_others() -> None:
    before = placed(group_pods(range(3)), statefulsets(3))
    after = plan(group_pods(range(6)), statefulsets(6), placement=before)
    grown = groups_of(after.record)
    assert sorted(grown) == [f"serve-{g}" for g in range(6)]
    assert all(grown[unit] == groups_of(before)[unit] for unit in groups_of(before))
    assert after.record is not None
    assert len({p.index for p in after.record.slices}) == 6


def test_a_recreated_group_keeps_its_clique_and_channel_while_its_pods_are_gone() -> None:
    before = placed(group_pods(range(6)), statefulsets(6))
    others = [p for p in group_pods(range(6)) if not p.metadata.name.startswith("serve-2")]
    found = {k: v for k, v in statefulsets(6).items() if k != "StatefulSet/serve-2"}
    gone = plan(others, found, placement=before)
    assert gone.record is not None
    between = next(p for p in gone.record.slices if p.unit == "serve-2")
    assert between.slots(4) == 4 and between.placed_pods == 0
    # LWS makes the group again: new pods (new uids) under the same names.
    again = group_pods([2], uid="new-")
    back = plan([*others, *again], statefulsets(6), placement=gone.record)
    assert groups_of(back.record)["serve-2"] == groups_of(before)["serve-2"]
    pinned = {pin.pod: pin.node for pin in back.pins}
    seated = {
        pod.name: member.node
        for piece in before.slices
        if piece.unit == "serve-2"
        for member in piece.members
        for pod in member.pods
    }
    assert {p.metadata.name: pinned.get(p.metadata.name) for p in again} == seated


def test_units_of_a_unit_label_take_spec_gang_size_each() -> None:
    cd = domain(gang=2, unit_label="team")
    pods = [pod(f"p{i}", labels={"team": "ab"[i % 2]}) for i in range(4)] + [pod("none")]
    result = plan(pods, {}, cd=cd)
    groups = groups_of(result.record)
    assert sorted(groups) == ["a", "b"]
    assert [(h.pod, h.reason) for h in result.holds] == [("none", "InvalidRequest")]


def test_a_gang_of_a_kind_cdo_cannot_size_is_held_with_how_to_declare_it() -> None:
    pods = [pod("p0", owner=("RayCluster", "ray", "ray-uid"))]
    gang = gang_size(explicit=None, pods=pods, workload=lambda *_: None)
    assert isinstance(gang, UndeclaredSize)
    result = plan_domain(
        key="default/train", domain=domain(), placement=None, pods=pods, gang=gang,
        view=view(RACKS),
    )  # fmt: skip
    assert [(h.pod, h.reason) for h in result.holds] == [("p0", GANG_SIZE_UNDECLARED)]
    assert "spec.gang.size" in result.holds[0].message
    assert result.record is None


def jobset_job(
    replicated: str, index: int, *, attempt: str = "0", makes: str = TEMPLATE
) -> Workload:
    return workload(
        uid=f"{replicated}-{index}-uid",
        parallelism=36,
        completions=36,
        makes=makes,
        labels={
            "jobset.sigs.k8s.io/jobset-name": "train",
            "jobset.sigs.k8s.io/restart-attempt": attempt,
        },
    )


def jobset_pod() -> Pod:
    return pod(
        "train-workers-0-0",
        owner=("Job", "train-workers-0", "workers-0-uid"),
        labels={
            "jobset.sigs.k8s.io/jobset-name": "train",
            "jobset.sigs.k8s.io/global-replicas": "2",
            "jobset.sigs.k8s.io/restart-attempt": "1",
        },
    )


@pytest.mark.parametrize(
    ("jobs", "expected"),
    [
        pytest.param([jobset_job("workers", 0, attempt="1"), jobset_job("workers", 1, attempt="1")],
                     72, id="every Job of the JobSet"),
        pytest.param([jobset_job("workers", 0, attempt="1"),
                      jobset_job("driver", 0, attempt="1", makes="other")],
                     36, id="only the Jobs whose pods use the domain"),
        pytest.param([jobset_job("workers", 0, attempt="1")],
                     "waiting to see the 2 Jobs of JobSet train", id="waits for all its Jobs"),
        pytest.param([jobset_job("workers", 0, attempt="1"), jobset_job("workers", 1, attempt="0")],
                     "waiting to see the 2 Jobs of JobSet train",
                     id="a Job of an earlier attempt does not count"),
    ],
)  # fmt: skip
def test_a_jobset_gang_is_every_pod_of_its_jobs_that_use_the_domain(
    jobs: list[Workload], expected: int | str
) -> None:
    gang = gang_size(
        explicit=None, pods=[jobset_pod()], workload=lambda *_: None, template=TEMPLATE,
        jobset_jobs=lambda namespace, name: jobs if name == "train" else (),
    )  # fmt: skip
    assert (gang.pods if isinstance(gang, GangSize) else gang.message) == expected


def test_a_jobsets_jobs_whose_pods_take_no_gpu_are_left_out_of_its_gpu_gang() -> None:
    # A launcher Job (one pod without GPUs) beside the workers: the GPU gang is the workers.
    launcher = workload(
        uid="launcher-0-uid", parallelism=1, completions=1, makes=TEMPLATE,
        labels={"jobset.sigs.k8s.io/jobset-name": "train",
                "jobset.sigs.k8s.io/restart-attempt": "1"},
    )  # fmt: skip
    jobs = [jobset_job("workers", 0, attempt="1"), launcher]
    gang = gang_size(
        explicit=None, pods=[jobset_pod()], workload=lambda *_: None, template=TEMPLATE,
        jobset_jobs=lambda namespace, name: jobs, skip_jobs=frozenset({"launcher-0-uid"}),
    )  # fmt: skip
    assert isinstance(gang, GangSize) and gang.pods == 36


def test_a_declared_size_counts_the_pods_without_gpus_among_it() -> None:
    declared = GangSize(pods=5, source="spec.gang.size")
    assert less_channel_only(declared, 0) is declared
    assert less_channel_only(declared, 1) == GangSize(
        pods=4, source="spec.gang.size, less 1 without GPUs"
    )
    assert less_channel_only(declared, 7).pods == 0


def test_unit_records_split_and_merge_back_unchanged() -> None:
    record = placed(group_pods(range(6)), statefulsets(6))
    assert merge_units(record, unit_specs(record), gpus_per_pod=4) == record


def one_gpu_groups(groups: int) -> list[Pod]:
    return [
        pod(
            f"serve-{g}" if w == 0 else f"serve-{g}-{w}",
            gpus=1,
            owner=("StatefulSet", "serve" if w == 0 else f"serve-{g}", "u"),
            labels={LWS_NAME: "serve", LWS_GROUP_INDEX: str(g), LWS_WORKER_INDEX: str(w)},
        )
        for g in range(groups)
        for w in range(4)
    ]


def test_eighteen_small_groups_pack_densely_beside_another_domain_each_on_its_own_channel() -> None:
    other = slice_of(*((f"a-n{i:02d}", 1, (f"o{i}",)) for i in range(9)), clique=CLIQUE_A)
    other_record = PlacementSpec(gpus_per_pod=4, size=9, slices=(other,))
    cd = domain()
    pods = one_gpu_groups(18)
    units = split_units(pods, unit_label=None)
    asks = unit_asks(
        units, recorded={}, explicit=None, unit_label=None, namespace="default",
        template=TEMPLATE, workload=lookup(statefulsets(18)),
        jobset_jobs=lambda namespace, name: (), ranks_of=lambda pods: {},
    )  # fmt: skip
    result = plan_units(
        key="default/train", domain=cd, placement=None, units=asks,
        view=view(RACKS, other=other_record), gpus_of=lambda p: p.gpus("nvidia.com/gpu"),
    )  # fmt: skip
    assert result.record is not None
    groups = groups_of(result.record)
    assert len(groups) == 18
    # Dense: 72 one-GPU pods on 18 nodes of 4 GPUs, the 9 free nodes of rack A used too.
    nodes = {m.node for piece in result.record.slices for m in piece.members}
    assert len(nodes) == 18
    assert any(node.startswith("a-") for node in nodes)
    channels = [(clique, channel) for clique, channel, _ in groups.values()]
    assert len(set(channels)) == 18
    assert (CLIQUE_A, other.channel) not in channels


def test_a_group_larger_than_a_clique_is_sliced_within_its_unit() -> None:
    result = plan(group_pods([0], 20), statefulsets(1, 20))
    assert result.record is not None
    pieces = sorted(result.record.slices, key=lambda p: p.first_rank)
    assert {p.unit for p in pieces} == {"serve-0"}
    assert [(p.first_rank, p.size) for p in pieces] == [(0, 18), (18, 2)]
    assert len({p.clique for p in pieces}) == 2
