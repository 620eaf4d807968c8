"""Failover of a slice its clique can no longer hold: marked stuck, moved after the grace to
another clique with its pods evicted, or left waiting with ``policy: Wait``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import msgspec
import pytest

from services.clique_allocator.gang import GangSize
from services.clique_allocator.plan import plan_domain
from services.clique_allocator.planning.failover import Waited
from services.clique_allocator.planning.outcome import Plan
from shared.crds.computedomain import ComputeDomain
from shared.crds.placement import PlacementSpec
from shared.kube.models import Node, Pod
from shared.sightings import Sightings

from .builders import CLIQUE_A, CLIQUE_B, NOW, domain, node, pod, rack, view

CLIQUE_C = "0f6d1c1e-8c1d-4bb7-9d49-3f1e0f0c2a02.1"
INDEX = "batch.kubernetes.io/job-completion-index"
RACKS = rack("a", CLIQUE_A) + rack("b", CLIQUE_B) + rack("c", CLIQUE_C)
SLICED = domain(slice_size=4)


def job_pod(index: int, **fields: object) -> Pod:
    return pod(
        f"train-{index}",
        labels={INDEX: str(index)},
        owner=("Job", "train", "job-uid"),
        **fields,  # type: ignore[arg-type]
    )


def run(
    pods: Sequence[Pod],
    *,
    nodes: list[Node],
    placement: PlacementSpec | None = None,
    cd: ComputeDomain = SLICED,
    after_s: float = 0,
    waited: Waited | None = None,
) -> Plan:
    records = {"train": placement} if placement is not None else {}
    return plan_domain(
        key="default/train",
        domain=cd,
        placement=placement,
        pods=pods,
        gang=GangSize(pods=8, source="Job train"),
        view=view(nodes, **records),
        ranks={p.metadata.name: int(p.metadata.labels[INDEX]) for p in pods},
        now=NOW + timedelta(seconds=after_s),
        waited=waited,
    )


def running(plan: Plan) -> list[Pod]:
    """The plan's pods as they run once pinned."""
    assert plan.record is not None
    seats = {p.name: m.node for s in plan.record.slices for m in s.members for p in m.pods}
    return [
        job_pod(int(name.rsplit("-", 1)[1]), gated=False, pinned_to=seats[name], phase="Running")
        for name in sorted(seats)
    ]


def placed_in_a_and_b() -> tuple[PlacementSpec, list[Pod]]:
    first = run([job_pod(i) for i in range(8)], nodes=RACKS[:8])  # only cliques A and B exist
    assert first.record is not None
    assert [s.clique for s in first.record.slices] == [CLIQUE_A, CLIQUE_B]
    return first.record, running(first)


def lost_b() -> list[Node]:
    """Clique B's nodes lost their fabric: the health monitor removed their clique label."""
    return [
        node(n.metadata.name, clique=None) if n.metadata.name.startswith("b-") else n for n in RACKS
    ]


def test_a_slice_whose_clique_is_gone_is_marked_stuck_and_moves_only_after_the_grace() -> None:
    record, pods = placed_in_a_and_b()

    marked = run(pods, nodes=lost_b(), placement=record)

    assert marked.record is not None
    slices = marked.record.slices
    assert slices[1].clique == CLIQUE_B and slices[1].waiting_since == NOW
    assert slices[0].waiting_since is None
    assert marked.evictions == ()
    assert [n.reason for n in marked.notices] == ["SliceStuck"]
    assert marked.retry_after_s == 300

    moved = run(pods, nodes=lost_b(), placement=marked.record, after_s=300)

    assert moved.record is not None
    new = moved.record.slices[1]
    assert (new.clique, new.moved_from, new.waiting_since) == (CLIQUE_C, CLIQUE_B, None)
    assert (new.first_rank, new.size, new.placed_pods) == (4, 4, 0)
    assert moved.record.slices[0] == record.slices[0]
    assert set(moved.evictions) == {f"train-{i}" for i in range(4, 8)}
    assert {ref.name for ref in moved.record.evicting} == set(moved.evictions)
    assert "FailedOver" in [n.reason for n in moved.notices]


class Monotonic:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("skew_s", [30, -30], ids=["stamped-30s-ahead", "stamped-30s-behind"])
def test_the_grace_holds_on_a_leader_whose_clock_differs_from_the_stamps(skew_s: int) -> None:
    """The wait was stamped by a replica whose clock ran 30 s ahead of (or behind) the one that
    leads now; the new leader moves the slice after the whole grace (300 s) on its own clock,
    never sooner, whatever it reads in the stamp."""
    record, pods = placed_in_a_and_b()
    stamped_by_other = run(pods, nodes=lost_b(), placement=record, after_s=skew_s)
    assert stamped_by_other.record is not None
    clock = Monotonic()
    seen: Sightings[tuple[str, int, datetime]] = Sightings(clock)

    def waited(key: str, index: int, since: datetime) -> float:
        return seen.age_s((key, index, since))

    def moved_after(seconds: float) -> bool:
        clock.now = seconds
        plan = run(
            pods, nodes=lost_b(), placement=stamped_by_other.record, after_s=seconds,
            waited=waited,
        )  # fmt: skip
        assert plan.record is not None
        return plan.record.slices[1].clique != CLIQUE_B

    # Read against the new leader's clock the stamp says 330 s or 270 s ago at 300 s: moved
    # 30 s early, or the stamp of the future kept it 30 s longer.
    assert not moved_after(0)
    assert not moved_after(299)
    assert moved_after(300)


def test_the_replacements_of_evicted_pods_are_seated_in_the_new_slice() -> None:
    record, pods = placed_in_a_and_b()
    marked = run(pods, nodes=lost_b(), placement=record)
    moved = run(pods, nodes=lost_b(), placement=marked.record, after_s=300)
    assert moved.record is not None
    replacements = [job_pod(i, uid=f"new-{i}") for i in range(4, 8)]

    seated = run([*pods[:4], *replacements], nodes=lost_b(), placement=moved.record, after_s=310)

    assert seated.record is not None
    assert {p.node for p in seated.pins} <= {f"c-n0{i}" for i in range(4)}
    assert len(seated.pins) == 4
    assert seated.record.evicting == ()  # the evicted pods are gone
    assert seated.record.slices[1].placed_pods == 4


def test_policy_wait_keeps_a_stuck_slice_where_it_is() -> None:
    record, pods = placed_in_a_and_b()
    waiting = domain(slice_size=4, failover={"policy": "Wait"})
    marked = run(pods, nodes=lost_b(), placement=record, cd=waiting)

    later = run(pods, nodes=lost_b(), placement=marked.record, cd=waiting, after_s=3600)

    assert later.record is not None
    assert later.record.slices[1].clique == CLIQUE_B
    assert later.evictions == () and later.retry_after_s is None


def test_a_cordoned_node_never_moves_a_slice() -> None:
    record, pods = placed_in_a_and_b()
    cordoned = [
        node(n.metadata.name, clique=CLIQUE_B, unschedulable=True)
        if n.metadata.name.startswith("b-")
        else n
        for n in RACKS
    ]

    plan = run(pods, nodes=cordoned, placement=record, after_s=3600)

    assert plan.record is not None
    assert all(s.waiting_since is None for s in plan.record.slices)
    assert plan.evictions == ()


def test_a_slice_that_recovers_within_the_grace_stays_and_forgets_it_waited() -> None:
    record, pods = placed_in_a_and_b()
    marked = run(pods, nodes=lost_b(), placement=record)

    recovered = run(pods, nodes=RACKS, placement=marked.record, after_s=120)

    assert recovered.record is not None
    assert recovered.record.slices[1].waiting_since is None
    assert recovered.record.slices[1].clique == CLIQUE_B


def test_with_no_other_clique_with_room_the_slice_keeps_waiting() -> None:
    record, pods = placed_in_a_and_b()
    no_c = [n for n in lost_b() if not n.metadata.name.startswith("c-")]
    marked = run(pods, nodes=no_c, placement=record)

    blocked = run(pods, nodes=no_c, placement=marked.record, after_s=301)

    assert blocked.record is not None
    assert blocked.record.slices[1].clique == CLIQUE_B
    assert blocked.evictions == ()
    assert "FailoverBlocked" in [n.reason for n in blocked.notices]
    assert msgspec.structs.asdict(blocked.record.slices[1])["waiting_since"] == NOW


def test_a_member_drained_from_a_full_clique_waits_there_and_never_moves_the_slice() -> None:
    record, pods = placed_in_a_and_b()
    # kubectl drain b-n03: cordoned, its pod evicted and gone, the Job's replacement gated.
    drained = [
        node(n.metadata.name, clique=CLIQUE_B, unschedulable=True)
        if n.metadata.name == "b-n03"
        else n
        for n in RACKS
    ]
    (gone,) = [p for p in pods if p.spec.node_selector.get("kubernetes.io/hostname") == "b-n03"]
    index = int(gone.metadata.labels[INDEX])
    replacement = job_pod(index, uid="replacement-uid")
    others = [p for p in pods if p is not gone]

    plan = run([*others, replacement], nodes=drained, placement=record, after_s=3600)

    assert plan.record is not None
    assert all(s.waiting_since is None for s in plan.record.slices)
    assert plan.evictions == ()
    (hold,) = plan.holds
    assert (hold.pod, hold.reason) == (replacement.metadata.name, "CliqueFull")
