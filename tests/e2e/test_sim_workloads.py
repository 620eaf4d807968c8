"""JobSet and LeaderWorkerSet on the whole simulated cluster (scheduler, kubelets with graceful
pod deletion, the API server's garbage collector), applied with the real kubectl: their pods run
with the upstream labels, and a deleted worker recreates only its group."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from shared.kube.client import KubeClient
from shared.kube.models import Pod
from shared.kube.resources import PODS
from sim.cluster import ClusterOptions, SimulatedCluster
from sim.controllers.jobset import JOB_GLOBAL_INDEX, JOBSET_NAME
from sim.controllers.leaderworkerset import GROUP_INDEX, GROUP_KEY, NAME, WORKER_INDEX
from sim.controllers.objects import JOB_COMPLETION_INDEX
from sim.kubelet import KubeletSettings
from tests.support.wait import wait_for

KUBECTL = Path(sys.executable).parent / "kubectl"


class PodList(msgspec.Struct):
    items: list[Pod]


@pytest.fixture
async def cluster() -> AsyncIterator[SimulatedCluster]:
    state = Path(tempfile.mkdtemp(prefix="cdo-sim-"))  # short: unix socket paths are limited
    options = ClusterOptions(
        state_dir=state,
        label_cliques=True,
        kubelet=KubeletSettings(lease_duration_s=4, heartbeat_interval_s=0.5),
    )
    try:
        async with SimulatedCluster.running(options) as running:
            yield running
    finally:
        shutil.rmtree(state, ignore_errors=True)


async def kubectl(cluster: SimulatedCluster, *args: str, stdin: str | None = None) -> str:
    process = await asyncio.create_subprocess_exec(
        str(KUBECTL), "--kubeconfig", str(cluster.kubeconfig), *args,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await process.communicate(stdin.encode() if stdin is not None else None)
    assert process.returncode == 0, out.decode()
    return out.decode()


async def running_pods(client: KubeClient, selector: str) -> list[Pod]:
    raw = await client.list(PODS, namespace="default", label_selector=selector)
    return [
        pod
        for pod in msgspec.json.decode(raw, type=PodList).items
        if pod.status.phase == "Running" and pod.metadata.deletion_timestamp is None
    ]


CONTAINER = {"name": "main", "image": "work:1", "resources": {"requests": {"cpu": "100m"}}}
JOB_SET = {
    "apiVersion": "jobset.x-k8s.io/v1alpha2",
    "kind": "JobSet",
    "metadata": {"name": "train"},
    "spec": {
        "replicatedJobs": [
            {
                "name": name,
                "replicas": 2,
                "template": {
                    "spec": {
                        "parallelism": 3,
                        "completions": 3,
                        "backoffLimit": 0,
                        "template": {"spec": {"containers": [CONTAINER]}},
                    }
                },
            }
            for name in ("a", "b")
        ]
    },
}
LWS = {
    "apiVersion": "leaderworkerset.x-k8s.io/v1",
    "kind": "LeaderWorkerSet",
    "metadata": {"name": "serve"},
    "spec": {
        "replicas": 3,
        "leaderWorkerTemplate": {
            "size": 3,
            "workerTemplate": {"spec": {"containers": [CONTAINER]}},
        },
    },
}


async def test_jobset_pods_run_with_their_global_ranks(cluster: SimulatedCluster) -> None:
    await kubectl(cluster, "apply", "-f", "-", stdin=json.dumps(JOB_SET))

    async def twelve() -> list[Pod] | None:
        pods = await running_pods(cluster.client, f"{JOBSET_NAME}=train")
        return pods if len(pods) == 12 else None

    pods = await wait_for(twelve, timeout=60, what="12 JobSet pods running")
    ranks = sorted(
        int(p.metadata.labels[JOB_GLOBAL_INDEX]) * 3 + int(p.metadata.labels[JOB_COMPLETION_INDEX])
        for p in pods
    )
    assert ranks == list(range(12))
    listed = await kubectl(cluster, "get", "jobs", "-l", f"{JOBSET_NAME}=train", "-o", "name")
    assert sorted(listed.split()) == [f"job.batch/train-{rj}-{i}" for rj in "ab" for i in (0, 1)]


async def test_lws_groups_run_and_a_deleted_worker_recreates_its_group(
    cluster: SimulatedCluster,
) -> None:
    await kubectl(cluster, "apply", "-f", "-", stdin=json.dumps(LWS))

    async def groups() -> dict[str, list[Pod]] | None:
        pods = await running_pods(cluster.client, f"{NAME}=serve")
        by_group: dict[str, list[Pod]] = {}
        for pod in pods:
            if GROUP_KEY in pod.metadata.labels and WORKER_INDEX in pod.metadata.labels:
                by_group.setdefault(pod.metadata.labels[GROUP_INDEX], []).append(pod)
        whole = sorted(by_group) == ["0", "1", "2"] and all(len(g) == 3 for g in by_group.values())
        return by_group if whole else None

    before = await wait_for(groups, timeout=60, what="three running groups of three")

    async def available() -> bool:
        out = await kubectl(
            cluster, "get", "lws/serve", "-o",
            "jsonpath={.status.conditions[?(@.type=='Available')].status}",
        )  # fmt: skip
        return out == "True"

    await wait_for(available, timeout=30, what="the LWS Available")
    victim = next(p for p in before["1"] if p.metadata.labels[WORKER_INDEX] == "2")
    await kubectl(cluster, "delete", "pod", victim.metadata.name, "--wait=false")

    def uids(pods: list[Pod]) -> set[str]:
        return {p.metadata.uid for p in pods}

    async def recreated() -> dict[str, list[Pod]] | None:
        now = await groups()
        return now if now and not uids(now["1"]) & uids(before["1"]) else None

    after = await wait_for(recreated, timeout=60, what="group 1 made again and running")
    assert uids(after["0"]) == uids(before["0"])
    assert uids(after["2"]) == uids(before["2"])
