"""StatefulSets, JobSets and LeaderWorkerSets as a user writes and reads them, over HTTP."""

from __future__ import annotations

from typing import Any

import msgspec

from shared.kube.resources import JOB_SETS, JOBS, LEADER_WORKER_SETS, STATEFUL_SETS
from sim.controllers.objects import Job, StatefulSet, controller_of
from sim.controllers.setkinds import JobSet, LeaderWorkerSet
from tests.integration.controllers.cluster import NAMESPACE, Cluster, pod_template


async def create_stateful_set(
    cluster: Cluster,
    name: str,
    *,
    replicas: int,
    parallel: bool = True,
    template: dict[str, Any] | None = None,
) -> StatefulSet:
    template = template or pod_template(app=name)
    body = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "podManagementPolicy": "Parallel" if parallel else "OrderedReady",
            "selector": {"matchLabels": template["metadata"]["labels"]},
            "template": template,
        },
    }
    raw = await cluster.client.create(STATEFUL_SETS, body, namespace=NAMESPACE)
    return msgspec.json.decode(raw, type=StatefulSet)


async def scale_stateful_set(cluster: Cluster, name: str, replicas: int) -> None:
    await cluster.client.patch(
        STATEFUL_SETS, name, {"spec": {"replicas": replicas}}, namespace=NAMESPACE
    )


async def stateful_set(cluster: Cluster, name: str) -> StatefulSet | None:
    raw = await cluster.client.get_or_none(STATEFUL_SETS, name, namespace=NAMESPACE)
    return None if raw is None else msgspec.json.decode(raw, type=StatefulSet)


async def stateful_sets(cluster: Cluster) -> list[StatefulSet]:
    return await cluster._list(STATEFUL_SETS, StatefulSet)


def job_template(*, parallelism: int, completions: int, backoff_limit: int = 0) -> dict[str, Any]:
    return {
        "spec": {
            "parallelism": parallelism,
            "completions": completions,
            "backoffLimit": backoff_limit,
            "template": {
                "metadata": {"labels": {"app": "train"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "train:1"}],
                },
            },
        }
    }


def job_set_manifest(
    name: str, replicated: list[tuple[str, int, int]], *, max_restarts: int | None = None
) -> dict[str, Any]:
    """A JobSet of ``(name, replicas, pods per job)`` replicated jobs."""
    spec: dict[str, Any] = {
        "replicatedJobs": [
            {
                "name": rj,
                "replicas": replicas,
                "template": job_template(parallelism=pods, completions=pods),
            }
            for rj, replicas, pods in replicated
        ]
    }
    if max_restarts is not None:
        spec["failurePolicy"] = {"maxRestarts": max_restarts}
    return {
        "apiVersion": JOB_SETS.api_version,
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": spec,
    }


async def create_job_set(cluster: Cluster, body: dict[str, Any]) -> JobSet:
    raw = await cluster.client.create(JOB_SETS, body, namespace=NAMESPACE)
    return msgspec.json.decode(raw, type=JobSet)


async def job_set(cluster: Cluster, name: str) -> JobSet:
    raw = await cluster.client.get(JOB_SETS, name, namespace=NAMESPACE)
    return msgspec.json.decode(raw, type=JobSet)


async def jobs_of(cluster: Cluster, owner: JobSet) -> list[Job]:
    uid = owner.metadata.uid
    return [
        job
        for job in await cluster._list(JOBS, Job)
        if (ref := controller_of(job)) is not None and ref.uid == uid
    ]


def lws_manifest(name: str, *, replicas: int, size: int) -> dict[str, Any]:
    return {
        "apiVersion": LEADER_WORKER_SETS.api_version,
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "leaderWorkerTemplate": {
                "size": size,
                "workerTemplate": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "main", "image": "serve:1"}]},
                },
            },
        },
    }


async def lws(cluster: Cluster, name: str) -> LeaderWorkerSet:
    raw = await cluster.client.get(LEADER_WORKER_SETS, name, namespace=NAMESPACE)
    return msgspec.json.decode(raw, type=LeaderWorkerSet)
