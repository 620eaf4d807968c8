"""The pure decisions of the StatefulSet, JobSet and LeaderWorkerSet controllers."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from shared.kube.models import Pod
from sim.controllers.expectations import Outstanding, PendingCreate
from sim.controllers.jobset import (
    JOB_GLOBAL_INDEX,
    JOB_KEY,
    RESTART_ATTEMPT,
    child_jobs,
    plan_job_set,
)
from sim.controllers.leaderworkerset import (
    GROUP_INDEX,
    GROUP_KEY,
    LEADER_NAME,
    NAME,
    WORKER_INDEX,
    leader_stateful_set,
    missing_labels,
    worker_stateful_set,
)
from sim.controllers.objects import Job, StatefulSet
from sim.controllers.setkinds import JobSet, LeaderWorkerSet, condition_true
from sim.controllers.statefulset import POD_INDEX_LABEL, plan_stateful_set, pod_for
from tests.unit.controllers.builders import NOW, pod, template


def stateful_set(replicas: int, *, parallel: bool, start: int = 0) -> StatefulSet:
    return msgspec.convert(
        {
            "metadata": {"name": "db", "namespace": "ns", "uid": "uid-db", "generation": 1},
            "spec": {
                "replicas": replicas,
                "podManagementPolicy": "Parallel" if parallel else "OrderedReady",
                "ordinals": {"start": start},
                "serviceName": "db",
                "template": template(app="db"),
            },
        },
        StatefulSet,
    )


def healthy(name: str) -> Pod:
    return pod(name, phase="Running", ready_for=60)


# -- StatefulSet --------------------------------------------------------------------------------


def test_parallel_creates_every_missing_ordinal_from_the_start() -> None:
    plan = plan_stateful_set(stateful_set(3, parallel=True, start=1), [], Outstanding())
    assert plan.create == (1, 2, 3)


def test_ordered_ready_waits_for_the_lower_pod_to_be_ready() -> None:
    sts = stateful_set(3, parallel=False)
    assert plan_stateful_set(sts, [pod("db-0")], Outstanding()).create == ()
    assert plan_stateful_set(sts, [healthy("db-0")], Outstanding()).create == (1,)


def test_a_pending_create_is_not_made_twice() -> None:
    pending = Outstanding(
        creates=(PendingCreate(name="db-0", resource_version=None, tag="0", expires=1e12),)
    )
    assert plan_stateful_set(stateful_set(2, parallel=True), [], pending).create == (1,)


@pytest.mark.parametrize("parallel", [True, False])
def test_scale_down_takes_the_highest_ordinal_first(parallel: bool) -> None:
    pods = [healthy(f"db-{i}") for i in range(4)]
    plan = plan_stateful_set(stateful_set(1, parallel=parallel), pods, Outstanding())
    names = [p.metadata.name for p in plan.delete]
    assert names == (["db-3", "db-2", "db-1"] if parallel else ["db-3"])


def test_a_failed_pod_is_deleted_and_a_terminating_one_waited_for() -> None:
    sts = stateful_set(2, parallel=True)
    plan = plan_stateful_set(
        sts, [pod("db-0", phase="Failed"), pod("db-1", deleting=True)], Outstanding()
    )
    assert [p.metadata.name for p in plan.delete] == ["db-0"]
    assert plan.create == ()


def test_pods_are_named_and_labelled_by_ordinal() -> None:
    body = pod_for(stateful_set(2, parallel=True), 1).body
    assert body["metadata"]["name"] == "db-1"
    assert "generateName" not in body["metadata"]
    assert body["metadata"]["labels"][POD_INDEX_LABEL] == "1"
    assert (body["spec"]["hostname"], body["spec"]["subdomain"]) == ("db-1", "db")


# -- JobSet -------------------------------------------------------------------------------------


def job_set(*, max_restarts: int | None = None, status: dict[str, Any] | None = None) -> JobSet:
    spec: dict[str, Any] = {
        "replicatedJobs": [
            {"name": "a", "replicas": 2, "template": {"spec": {"parallelism": 2}}},
            {"name": "b", "replicas": 1, "template": {"spec": {"parallelism": 4}}},
        ]
    }
    if max_restarts is not None:
        spec["failurePolicy"] = {"maxRestarts": max_restarts}
    return msgspec.convert(
        {
            "metadata": {"name": "js", "namespace": "ns", "uid": "uid-js", "generation": 1},
            "spec": spec,
            "status": status or {},
        },
        JobSet,
    )


def child(name: str, *, attempt: int = 0, finished: str = "") -> Job:
    conditions = [{"type": finished, "status": "True"}] if finished else []
    return msgspec.convert(
        {
            "metadata": {
                "name": name,
                "namespace": "ns",
                "uid": f"uid-{name}",
                "labels": {RESTART_ATTEMPT: str(attempt)},
            },
            "status": {"conditions": conditions},
        },
        Job,
    )


ALL = ("js-a-0", "js-a-1", "js-b-0")


def test_child_jobs_number_globally_in_the_order_listed() -> None:
    children = child_jobs(job_set(), restarts=0)
    assert [c.name for c in children] == list(ALL)
    marks = [c.body["metadata"]["labels"] for c in children]
    assert [m[JOB_GLOBAL_INDEX] for m in marks] == ["0", "1", "2"]
    assert len({m[JOB_KEY] for m in marks}) == 3
    pod_labels = children[2].body["spec"]["template"]["metadata"]["labels"]
    assert pod_labels[JOB_GLOBAL_INDEX] == "2"
    assert children[0].body["spec"]["completionMode"] == "Indexed"


def test_a_failure_within_the_limit_counts_a_restart_and_deletes_the_attempt() -> None:
    jobs = [child("js-a-0", finished="Failed"), child("js-a-1"), child("js-b-0")]
    plan = plan_job_set(job_set(max_restarts=2), jobs, pending=set(), restarts_floor=0, now=NOW)
    assert (plan.status.restarts, plan.status.restarts_count_towards_max) == (1, 1)
    assert sorted(j.metadata.name for j in plan.delete) == list(ALL)
    assert plan.create == ()  # only once the restart is recorded


def test_after_a_restart_the_new_attempt_is_made_once_the_old_jobs_are_gone() -> None:
    js = job_set(max_restarts=2, status={"restarts": 1, "restartsCountTowardsMax": 1})
    plan = plan_job_set(js, [], pending=set(), restarts_floor=0, now=NOW)
    assert [c.name for c in plan.create] == list(ALL)
    assert all(c.body["metadata"]["labels"][RESTART_ATTEMPT] == "1" for c in plan.create)


def test_without_a_failure_policy_one_failure_fails_the_job_set() -> None:
    jobs = [child("js-a-0", finished="Failed"), child("js-a-1"), child("js-b-0")]
    plan = plan_job_set(job_set(), jobs, pending=set(), restarts_floor=0, now=NOW)
    assert condition_true(plan.status.conditions, "Failed")
    reason = next(c.reason for c in plan.status.conditions if c.type == "Failed")
    assert reason == "FailedJobs"
    assert plan.status.terminal_state == "Failed"


def test_every_job_complete_completes_it() -> None:
    jobs = [child(name, finished="Complete") for name in ALL]
    plan = plan_job_set(job_set(), jobs, pending=set(), restarts_floor=0, now=NOW)
    assert condition_true(plan.status.conditions, "Completed")
    assert plan.status.terminal_state == "Completed"
    partly = plan_job_set(job_set(), jobs[:2], pending=set(), restarts_floor=0, now=NOW)
    assert not condition_true(partly.status.conditions, "Completed")


# -- LeaderWorkerSet ----------------------------------------------------------------------------


def leader_worker_set(*, leader_template: bool = False) -> LeaderWorkerSet:
    lwt: dict[str, Any] = {"size": 4, "workerTemplate": template(role="worker")}
    if leader_template:
        lwt["leaderTemplate"] = template(role="leader")
    return msgspec.convert(
        {
            "metadata": {"name": "serve", "namespace": "ns", "uid": "uid-serve"},
            "spec": {"replicas": 3, "leaderWorkerTemplate": lwt},
        },
        LeaderWorkerSet,
    )


@pytest.mark.parametrize("separate", [True, False])
def test_the_leader_template_is_the_workers_when_absent(separate: bool) -> None:
    body = leader_stateful_set(leader_worker_set(leader_template=separate))
    labels = body["spec"]["template"]["metadata"]["labels"]
    assert labels["role"] == ("leader" if separate else "worker")
    assert (labels[NAME], labels[WORKER_INDEX]) == ("serve", "0")
    assert body["spec"]["replicas"] == 3


def test_a_worker_stateful_set_belongs_to_its_leader() -> None:
    leader = pod("serve-2", uid="uid-leader")
    body = worker_stateful_set(leader_worker_set(), leader, "2")
    assert body["metadata"]["name"] == "serve-2"
    assert body["metadata"]["ownerReferences"][0]["uid"] == "uid-leader"
    assert (body["spec"]["replicas"], body["spec"]["ordinals"]) == (3, {"start": 1})
    meta = body["spec"]["template"]["metadata"]
    assert meta["labels"][GROUP_INDEX] == "2"
    assert meta["annotations"][LEADER_NAME] == "serve-2"


def test_per_pod_labels_come_from_the_ordinal() -> None:
    lws = leader_worker_set()
    leader = pod("serve-1", labels={NAME: "serve", WORKER_INDEX: "0", POD_INDEX_LABEL: "1"})
    labels = missing_labels(lws, leader)
    assert labels[GROUP_INDEX] == "1"
    assert len(labels[GROUP_KEY]) == 40
    worker = pod("serve-1-3", labels={NAME: "serve", POD_INDEX_LABEL: "3"})
    assert missing_labels(lws, worker) == {WORKER_INDEX: "3"}
    done = pod("serve-1-3", labels={NAME: "serve", POD_INDEX_LABEL: "3", WORKER_INDEX: "3"})
    assert missing_labels(lws, done) == {}
