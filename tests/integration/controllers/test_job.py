"""Jobs against the emulator: parallelism, completions, failures, indexes."""

from __future__ import annotations

import pytest

from shared.kube.resources import JOBS
from sim.controllers.objects import JOB_COMPLETION_INDEX, Job, condition
from sim.controllers.pods import is_active
from tests.integration.controllers.cluster import Cluster
from tests.support.wait import wait_for

pytestmark = pytest.mark.usefixtures("controllers")


def finished(job: Job, kind: str) -> bool:
    found = condition(job.status.conditions, kind)
    return found is not None and found.status == "True"


async def test_parallelism_3_completions_5_finishes(cluster: Cluster) -> None:
    job = await cluster.create_job("work", parallelism=3, completions=5)
    most_active = 0

    async def run_one_to_success() -> bool:
        """The kubelet's part: finish one running pod per look, as pods appear."""
        nonlocal most_active
        if finished(await cluster.job("work"), "Complete"):
            return True
        active = await cluster.active_pods_of(job)
        most_active = max(most_active, len(active))
        if active:
            await cluster.set_phase(active[0], "Succeeded")
        return False

    await wait_for(run_one_to_success, what="a complete job", interval=0.05)
    assert most_active == 3
    done = await cluster.job("work")
    assert (done.status.succeeded, done.status.active, done.status.failed) == (5, 0, 0)
    assert done.status.completion_time is not None
    assert done.status.start_time is not None
    assert finished(done, "SuccessCriteriaMet")
    pods = await cluster.pods_of(job)
    assert len(pods) == 5
    assert all(p.status.phase == "Succeeded" for p in pods)
    assert all(p.metadata.labels["batch.kubernetes.io/job-name"] == "work" for p in pods)


async def test_failed_pods_are_retried_until_the_backoff_limit(cluster: Cluster) -> None:
    job = await cluster.create_job("work", parallelism=1, completions=1, backoff_limit=2)

    async def fail_each() -> bool:
        if finished(await cluster.job("work"), "Failed"):
            return True
        for pod in await cluster.active_pods_of(job):
            await cluster.set_phase(pod, "Failed")
        return False

    await wait_for(fail_each, what="a failed job", interval=0.05)
    failed = await cluster.job("work")
    assert failed.status.failed == 3
    reason = condition(failed.status.conditions, "Failed")
    assert reason is not None and reason.reason == "BackoffLimitExceeded"
    assert len(await cluster.pods_of(job)) == 3


async def test_indexed_job_runs_each_index_once(cluster: Cluster) -> None:
    job = await cluster.create_job("work", parallelism=3, completions=3, indexed=True)

    async def three_running() -> list[str] | None:
        pods = [p for p in await cluster.pods_of(job) if is_active(p)]
        indexes = sorted(p.metadata.annotations[JOB_COMPLETION_INDEX] for p in pods)
        return indexes if len(indexes) >= 3 else None

    assert await wait_for(three_running, what="three indexed pods") == ["0", "1", "2"]
    for pod in await cluster.active_pods_of(job):
        await cluster.set_phase(pod, "Succeeded")

    async def complete() -> bool:
        return finished(await cluster.job("work"), "Complete")

    await wait_for(complete, what="a complete indexed job")
    assert (await cluster.job("work")).status.completed_indexes == "0-2"
    assert len(await cluster.pods_of(job)) == 3


async def test_deleting_a_job_deletes_its_pods(cluster: Cluster) -> None:
    job = await cluster.create_job("work", parallelism=2, completions=4)
    await wait_for(lambda: cluster.active_pods_of(job), what="running pods")
    await cluster.client.delete(
        JOBS,
        "work",
        namespace="default",
        propagation="Background",
    )

    async def gone() -> bool:
        return not await cluster.pods_of(job)

    await wait_for(gone, what="the job's pods to go")
