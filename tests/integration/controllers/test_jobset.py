"""JobSets against the emulator: child Jobs and their labels, restarts, completion."""

from __future__ import annotations

import msgspec
import pytest

from shared.kube.models import Pod
from shared.kube.resources import PODS
from sim.controllers.jobset import (
    GLOBAL_REPLICAS,
    JOB_GLOBAL_INDEX,
    JOB_INDEX,
    JOB_KEY,
    JOBSET_NAME,
    REPLICATED_JOB_NAME,
    REPLICATED_JOB_REPLICAS,
    RESTART_ATTEMPT,
)
from sim.controllers.objects import JOB_COMPLETION_INDEX
from sim.controllers.pods import is_active
from sim.controllers.setkinds import JobSet, condition_true
from tests.integration.controllers.cluster import NAMESPACE, Cluster
from tests.integration.controllers.workloads import (
    create_job_set,
    job_set,
    job_set_manifest,
    jobs_of,
)
from tests.support.wait import wait_for

pytestmark = pytest.mark.usefixtures("controllers")

# A leader job of one pod and two worker jobs of two pods: five pods, global indexes 0..2.
SHAPE = [("leader", 1, 1), ("workers", 2, 2)]


async def active_pods(cluster: Cluster, js: JobSet) -> list[Pod]:
    return [
        p
        for p in await cluster.pods()
        if is_active(p) and p.metadata.labels.get(JOBSET_NAME) == js.metadata.name
    ]


async def wait_for_pods(cluster: Cluster, js: JobSet, attempt: int) -> list[Pod]:
    async def five() -> list[Pod] | None:
        pods = await active_pods(cluster, js)
        if len(pods) == 5 and all(p.metadata.labels[RESTART_ATTEMPT] == str(attempt) for p in pods):
            return pods
        return None

    return await wait_for(five, what=f"five pods of attempt {attempt}")


async def test_replicated_jobs_make_indexed_jobs_with_global_indexes(cluster: Cluster) -> None:
    js = await create_job_set(cluster, job_set_manifest("train", SHAPE))

    async def three_jobs() -> bool:
        return len(await jobs_of(cluster, js)) == 3

    await wait_for(three_jobs, what="three child jobs")
    jobs = {job.metadata.name: job for job in await jobs_of(cluster, js)}
    assert sorted(jobs) == ["train-leader-0", "train-workers-0", "train-workers-1"]
    expected = {
        "train-leader-0": ("leader", "1", "0", "0"),
        "train-workers-0": ("workers", "2", "0", "1"),
        "train-workers-1": ("workers", "2", "1", "2"),
    }
    keys = set()
    for name, (rj, replicas, index, global_index) in expected.items():
        job = jobs[name]
        assert job.spec.completion_mode == "Indexed"
        for marks in (job.metadata.labels, job.metadata.annotations):
            assert marks[REPLICATED_JOB_NAME] == rj
            assert marks[REPLICATED_JOB_REPLICAS] == replicas
            assert marks[JOB_INDEX] == index
            assert marks[JOB_GLOBAL_INDEX] == global_index
            assert marks[GLOBAL_REPLICAS] == "3"
            assert marks[RESTART_ATTEMPT] == "0"
        keys.add(job.metadata.labels[JOB_KEY])
    assert len(keys) == 3

    pods = await wait_for_pods(cluster, js, 0)
    ranks = sorted(
        (int(p.metadata.labels[JOB_GLOBAL_INDEX]), int(p.metadata.labels[JOB_COMPLETION_INDEX]))
        for p in pods
    )
    assert ranks == [(0, 0), (1, 0), (1, 1), (2, 0), (2, 1)]
    for pod in pods:
        assert pod.metadata.labels[JOBSET_NAME] == "train"
        assert pod.metadata.annotations[JOB_GLOBAL_INDEX] == pod.metadata.labels[JOB_GLOBAL_INDEX]
        raw = msgspec.json.decode(
            await cluster.client.get(PODS, pod.metadata.name, namespace=NAMESPACE)
        )
        job_name = pod.metadata.labels["batch.kubernetes.io/job-name"]
        index = pod.metadata.labels[JOB_COMPLETION_INDEX]
        # <jobset>-<replicatedJob>-<jobIndex>-<podIndex>, in the JobSet's subdomain.
        hostname = f"{job_name}-{index}"
        assert (raw["spec"]["hostname"], raw["spec"]["subdomain"]) == (hostname, "train")


async def test_a_failed_job_restarts_every_job_then_the_jobset_fails(cluster: Cluster) -> None:
    js = await create_job_set(cluster, job_set_manifest("train", SHAPE, max_restarts=1))
    first = await wait_for_pods(cluster, js, 0)
    worker = next(p for p in first if p.metadata.labels[REPLICATED_JOB_NAME] == "workers")
    await cluster.set_phase(worker, "Failed")

    second = await wait_for_pods(cluster, js, 1)
    assert not {p.metadata.uid for p in first} & {p.metadata.uid for p in second}
    jobs = await jobs_of(cluster, js)
    assert len(jobs) == 3
    assert all(job.metadata.labels[RESTART_ATTEMPT] == "1" for job in jobs)
    restarted = await job_set(cluster, "train")
    assert (restarted.status.restarts, restarted.status.restarts_count_towards_max) == (1, 1)

    await cluster.set_phase(second[0], "Failed")

    async def failed() -> JobSet | None:
        found = await job_set(cluster, "train")
        return found if condition_true(found.status.conditions, "Failed") else None

    done = await wait_for(failed, what="a failed JobSet")
    assert done.status.terminal_state == "Failed"
    reason = next(c.reason for c in done.status.conditions if c.type == "Failed")
    assert reason == "ReachedMaxRestarts"
    assert done.status.restarts == 1


async def test_all_jobs_complete_completes_the_jobset(cluster: Cluster) -> None:
    js = await create_job_set(cluster, job_set_manifest("train", SHAPE))
    for pod in await wait_for_pods(cluster, js, 0):
        await cluster.set_phase(pod, "Succeeded")

    async def completed() -> JobSet | None:
        found = await job_set(cluster, "train")
        return found if condition_true(found.status.conditions, "Completed") else None

    done = await wait_for(completed, what="a completed JobSet")
    assert done.status.terminal_state == "Completed"
    statuses = {s.name: s for s in done.status.replicated_jobs_status}
    assert (statuses["leader"].succeeded, statuses["workers"].succeeded) == (1, 2)
    assert not condition_true(done.status.conditions, "Failed")
