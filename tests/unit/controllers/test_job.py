"""Job desired state: pods to start and stop, counts, completion and failure."""

from __future__ import annotations

import msgspec
import pytest

from shared.kube.models import Pod
from sim.controllers.expectations import Outstanding, PendingCreate
from sim.controllers.job import format_indexes, parse_indexes, plan_job, pod_for
from sim.controllers.objects import JOB_COMPLETION_INDEX, Job, condition
from tests.unit.controllers.builders import NOW, job, pod

NOTHING = Outstanding()
IDX = JOB_COMPLETION_INDEX


def indexed_pod(index: int, *, phase: str = "Running", name: str = "") -> Pod:
    return pod(
        name or f"work-{index}-x",
        phase=phase,
        annotations={IDX: str(index)},
        labels={IDX: str(index)},
    )


def conditions(j: Job) -> list[tuple[str, str]]:
    return [(c.type, c.status) for c in j.status.conditions]


def after(j: Job, plan_status: object) -> Job:
    return msgspec.structs.replace(j, status=plan_status)


def test_starts_parallelism_pods_and_the_start_time() -> None:
    plan = plan_job(job(parallelism=3, completions=5), [], NOTHING, now=NOW)
    assert plan.create == (None, None, None)
    assert plan.status.start_time == "2030-01-01T12:00:00Z"


def test_never_more_active_than_completions_left() -> None:
    pods = [pod(f"s{i}", phase="Succeeded") for i in range(3)] + [pod("r", phase="Running")]
    plan = plan_job(job(parallelism=3, completions=5), pods, NOTHING, now=NOW)
    assert plan.create == (None,)
    assert (plan.status.active, plan.status.succeeded) == (1, 3)


def test_outstanding_creates_are_not_repeated() -> None:
    created = Outstanding(
        creates=(PendingCreate(name="p", resource_version=None, tag="", expires=1e9),)
    )
    plan = plan_job(job(parallelism=2, completions=2), [pod("a")], created, now=NOW)
    assert plan.create == ()


def test_failed_pods_are_replaced_and_counted() -> None:
    pods = [pod("f", phase="Failed"), pod("r", phase="Running")]
    plan = plan_job(job(parallelism=2, completions=2), pods, NOTHING, now=NOW)
    assert plan.create == (None,)
    assert plan.status.failed == 1


def test_completes_once_enough_succeeded_and_nothing_runs() -> None:
    j = job(parallelism=3, completions=2)
    pods = [pod("a", phase="Succeeded"), pod("b", phase="Succeeded"), pod("c", phase="Running")]
    first = plan_job(j, pods, NOTHING, now=NOW)
    assert [p.metadata.name for p in first.delete] == ["c"]
    assert conditions(after(j, first.status)) == [("SuccessCriteriaMet", "True")]
    assert first.status.completion_time is None
    second = plan_job(after(j, first.status), pods[:2], NOTHING, now=NOW)
    assert conditions(after(j, second.status)) == [
        ("SuccessCriteriaMet", "True"),
        ("Complete", "True"),
    ]
    assert second.status.completion_time == "2030-01-01T12:00:00Z"
    assert second.status.succeeded == 2
    finished = after(j, second.status)
    assert plan_job(finished, [], NOTHING, now=NOW).status == finished.status


def test_counts_do_not_drop_when_finished_pods_are_deleted() -> None:
    j = job(parallelism=1, completions=3, status={"succeeded": 2, "failed": 1})
    plan = plan_job(j, [], NOTHING, now=NOW)
    assert (plan.status.succeeded, plan.status.failed) == (2, 1)
    assert plan.create == (None,)


def test_fails_past_the_backoff_limit() -> None:
    j = job(parallelism=2, completions=4, backoff_limit=1)
    pods = [pod("f1", phase="Failed"), pod("f2", phase="Failed"), pod("r", phase="Running")]
    first = plan_job(j, pods, NOTHING, now=NOW)
    assert [p.metadata.name for p in first.delete] == ["r"]
    assert first.create == ()
    assert conditions(after(j, first.status)) == [("FailureTarget", "True")]
    second = plan_job(after(j, first.status), pods[:2], NOTHING, now=NOW)
    final = condition(second.status.conditions, "Failed")
    assert final is not None and final.reason == "BackoffLimitExceeded"
    assert second.status.completion_time is None


def test_without_completions_the_first_success_ends_the_job() -> None:
    j = job(parallelism=2, completions=None)
    assert plan_job(j, [], NOTHING, now=NOW).create == (None, None)
    pods = [pod("a", phase="Succeeded"), pod("b", phase="Running")]
    plan = plan_job(j, pods, NOTHING, now=NOW)
    assert plan.create == () and plan.delete == ()
    done = plan_job(j, pods[:1], NOTHING, now=NOW)
    assert condition(done.status.conditions, "Complete") is not None


def test_suspended_jobs_keep_nothing_running() -> None:
    j = job(parallelism=2, completions=4, suspend=True)
    plan = plan_job(j, [pod("a", phase="Running")], NOTHING, now=NOW)
    assert [p.metadata.name for p in plan.delete] == ["a"]
    assert plan.status.start_time is None
    suspended = condition(plan.status.conditions, "Suspended")
    assert suspended is not None and suspended.status == "True"
    resumed = plan_job(
        msgspec.structs.replace(job(parallelism=2, completions=4), status=plan.status),
        [],
        NOTHING,
        now=NOW,
    )
    again = condition(resumed.status.conditions, "Suspended")
    assert again is not None and (again.status, again.reason) == ("False", "JobResumed")
    assert resumed.create == (None, None)


def test_indexed_jobs_fill_the_lowest_free_indexes() -> None:
    j = job(parallelism=3, completions=5, indexed=True)
    pods = [indexed_pod(0, phase="Succeeded"), indexed_pod(2)]
    plan = plan_job(j, pods, NOTHING, now=NOW)
    assert plan.create == (1, 3)
    assert plan.status.completed_indexes == "0"
    assert plan.status.succeeded == 1


def test_indexed_surplus_pods_are_deleted() -> None:
    j = job(parallelism=3, completions=3, indexed=True, status={"completedIndexes": "0"})
    pods = [
        indexed_pod(0, name="late-zero"),
        indexed_pod(1, name="one-a"),  # same age: by name, "one-a" goes first
        indexed_pod(1, name="one-b"),
        indexed_pod(7, name="seven"),
    ]
    plan = plan_job(j, pods, NOTHING, now=NOW)
    assert sorted(p.metadata.name for p in plan.delete) == ["late-zero", "one-a", "seven"]
    assert plan.create == (2,)


def test_indexed_completion_lists_indexes() -> None:
    j = job(parallelism=2, completions=3, indexed=True, status={"completedIndexes": "0-1"})
    plan = plan_job(j, [indexed_pod(2, phase="Succeeded")], NOTHING, now=NOW)
    assert plan.status.completed_indexes == "0-2"
    assert condition(plan.status.conditions, "Complete") is not None


@pytest.mark.parametrize(
    ("text", "indexes"),
    [("", set()), ("0", {0}), ("0-2,4", {0, 1, 2, 4}), ("1,3-4,9", {1, 3, 4, 9})],
)
def test_index_lists_round_trip(text: str, indexes: set[int]) -> None:
    assert parse_indexes(text) == indexes
    assert format_indexes(indexes) == text


def test_indexed_pods_carry_their_index() -> None:
    body = pod_for(job(indexed=True, completions=3), 2).body
    assert body["metadata"]["generateName"] == "work-2-"
    assert body["metadata"]["annotations"][IDX] == "2"
    assert body["metadata"]["labels"][IDX] == "2"
    assert body["spec"]["hostname"] == "work-2"
    env = body["spec"]["containers"][0]["env"][0]
    assert env["name"] == "JOB_COMPLETION_INDEX"
    assert pod_for(job(indexed=True, completions=3), 2).tag == "2"
