"""A pod's rank from its workload's index labels, for each workload kind."""

from __future__ import annotations

import pytest

from services.clique_allocator.ranks import pod_rank

from .builders import pod

JOB = "batch.kubernetes.io/job-completion-index"
POD_INDEX = "apps.kubernetes.io/pod-index"
JOBSET = "jobset.sigs.k8s.io/job-global-index"
LWS_GROUP = "leaderworkerset.sigs.k8s.io/group-index"
LWS_WORKER = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_SIZE = "leaderworkerset.sigs.k8s.io/size"


def parallelism(namespace: str, job: str) -> int | None:
    return {"trainer-workers-2": 8}.get(job)


@pytest.mark.parametrize(
    ("labels", "owner", "rank"),
    [
        pytest.param({JOB: "7"}, ("Job", "train", "u"), 7, id="Indexed Job"),
        pytest.param({POD_INDEX: "3"}, ("StatefulSet", "web", "u"), 3, id="StatefulSet ordinal"),
        pytest.param(
            {JOBSET: "2", JOB: "5"}, ("Job", "trainer-workers-2", "u"), 21, id="JobSet pod"
        ),
        pytest.param(
            {JOBSET: "2", JOB: "5"}, ("Job", "unknown", "u"), None, id="JobSet, Job not seen"
        ),
        pytest.param(
            {LWS_GROUP: "3", LWS_WORKER: "1", LWS_SIZE: "4", POD_INDEX: "1"},
            ("StatefulSet", "lws-3", "u"),
            13,
            id="LeaderWorkerSet worker",
        ),
        pytest.param(
            {LWS_GROUP: "9f3a", LWS_WORKER: "1", LWS_SIZE: "4"},
            ("StatefulSet", "lws-x", "u"),
            None,
            id="LeaderWorkerSet with hashed group identity",
        ),
        pytest.param({JOB: "x"}, ("Job", "train", "u"), None, id="not a number"),
        pytest.param({}, ("ReplicaSet", "rs", "u"), None, id="Deployment pod"),
    ],
)
def test_rank_from_index_labels(
    labels: dict[str, str], owner: tuple[str, str, str], rank: int | None
) -> None:
    assert pod_rank(pod("p", labels=labels, owner=owner), parallelism=parallelism) == rank
