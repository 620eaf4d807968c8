"""LeaderWorkerSets against the emulator: the StatefulSets, the group labels, scaling through the
scale subresource, and a group recreated as a whole. Manifests go in with the real kubectl."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shared.kube.client import KubeClient
from shared.kube.models import Pod
from shared.kube.resources import LEADER_WORKER_SETS
from sim.controllers import ControllerManager
from sim.controllers.crds import DIRECTORY
from sim.controllers.leaderworkerset import (
    GROUP_INDEX,
    GROUP_KEY,
    LEADER_NAME,
    NAME,
    SIZE,
    WORKER_INDEX,
)
from sim.controllers.objects import controller_of
from sim.controllers.pods import is_active
from sim.controllers.setkinds import condition_true
from sim.kubeapi import KubeServer
from tests.integration.controllers.cluster import Cluster
from tests.integration.controllers.conftest import FAST
from tests.integration.controllers.workloads import lws, lws_manifest, stateful_set
from tests.integration.kubeapi.conftest import Kubectl
from tests.support.wait import wait_for

GROUPS, SIZE_OF_GROUP = 3, 4


@pytest.fixture
def kubectl(emulator: KubeServer, tmp_path: Path) -> Kubectl:
    return Kubectl(emulator.kubeconfig, tmp_path / "kubectl-cache")


async def group_pods(cluster: Cluster, name: str) -> dict[str, list[Pod]]:
    """Active pods of the LWS by group index, each list leader first."""
    groups: dict[str, list[Pod]] = {}
    for pod in await cluster.pods():
        labels = pod.metadata.labels
        if labels.get(NAME) == name and is_active(pod) and GROUP_INDEX in labels:
            groups.setdefault(labels[GROUP_INDEX], []).append(pod)
    for pods in groups.values():
        pods.sort(key=lambda p: int(p.metadata.labels.get(WORKER_INDEX, "99")))
    return groups


async def settled_groups(
    cluster: Cluster, name: str, count: int, size: int = SIZE_OF_GROUP
) -> dict[str, list[Pod]] | None:
    """The groups when there are exactly ``count``, each of ``size`` labelled pods."""
    groups = await group_pods(cluster, name)
    whole = all(
        len(pods) == size and all(WORKER_INDEX in p.metadata.labels for p in pods)
        for pods in groups.values()
    )
    return groups if sorted(groups) == [str(i) for i in range(count)] and whole else None


async def wait_for_groups(cluster: Cluster, name: str, count: int) -> dict[str, list[Pod]]:
    async def settled() -> dict[str, list[Pod]] | None:
        return await settled_groups(cluster, name, count)

    return await wait_for(settled, what=f"{count} whole groups")


def uids(pods: list[Pod]) -> set[str]:
    return {p.metadata.uid for p in pods}


async def test_kubectl_applied_lws_makes_the_statefulsets_labels_and_scales(
    kube_client: KubeClient, cluster: Cluster, kubectl: Kubectl
) -> None:
    out = await kubectl.ok("apply", "-f", str(DIRECTORY))
    assert "leaderworkersets.leaderworkerset.x-k8s.io" in out
    assert "jobsets.jobset.x-k8s.io" in out
    async with ControllerManager(kube_client, settings=FAST).running():
        manifest = json.dumps(lws_manifest("serve", replicas=GROUPS, size=SIZE_OF_GROUP))
        await kubectl.ok("apply", "-f", "-", stdin=manifest)
        groups = await wait_for_groups(cluster, "serve", GROUPS)

        leader_sts = await stateful_set(cluster, "serve")
        assert leader_sts is not None
        assert leader_sts.spec.replicas == GROUPS
        assert leader_sts.spec.pod_management_policy == "Parallel"
        owner = controller_of(leader_sts)
        assert owner is not None and (owner.kind, owner.name) == ("LeaderWorkerSet", "serve")
        keys = set()
        for index, pods in groups.items():
            leader, workers = pods[0], pods[1:]
            assert leader.metadata.name == f"serve-{index}"
            assert leader.metadata.labels[WORKER_INDEX] == "0"
            key = leader.metadata.labels[GROUP_KEY]
            keys.add(key)
            assert [w.metadata.name for w in workers] == [f"serve-{index}-{i}" for i in (1, 2, 3)]
            assert [w.metadata.labels[WORKER_INDEX] for w in workers] == ["1", "2", "3"]
            for pod in pods:
                assert pod.metadata.labels[GROUP_KEY] == key
                assert pod.metadata.labels["app"] == "serve"
                assert pod.metadata.annotations[SIZE] == str(SIZE_OF_GROUP)
            assert all(w.metadata.annotations[LEADER_NAME] == leader.metadata.name for w in workers)
            worker_sts = await stateful_set(cluster, f"serve-{index}")
            assert worker_sts is not None
            assert worker_sts.spec.replicas == SIZE_OF_GROUP - 1
            assert worker_sts.spec.ordinals.start == 1
            sts_owner = controller_of(worker_sts)
            assert sts_owner is not None
            assert (sts_owner.kind, sts_owner.uid) == ("Pod", leader.metadata.uid)
        assert len(keys) == GROUPS

        await cluster.run_pods()

        async def available() -> bool:
            found = await lws(cluster, "serve")
            return found.status.ready_replicas == GROUPS and condition_true(
                found.status.conditions, "Available"
            )

        await wait_for(available, what="every group ready")

        out = await kubectl.ok("scale", "lws/serve", "--replicas=1")
        assert "scaled" in out
        await wait_for_groups(cluster, "serve", 1)

        async def workers_gone() -> bool:
            return all(
                [await stateful_set(cluster, f"serve-{i}") is None for i in range(1, GROUPS)]
            )

        await wait_for(workers_gone, what="the worker StatefulSets of groups 1 and 2 gone")
        replicas = await kubectl.ok("get", "lws/serve", "-o", "jsonpath={.status.replicas}")
        assert replicas == "1"

        await kubectl.ok("scale", "lws/serve", "--replicas=3")
        await wait_for_groups(cluster, "serve", GROUPS)


@pytest.mark.usefixtures("controllers")
async def test_a_deleted_worker_recreates_only_its_group(cluster: Cluster) -> None:
    body = lws_manifest("serve", replicas=GROUPS, size=SIZE_OF_GROUP)
    await cluster.client.create(LEADER_WORKER_SETS, body, namespace="default")
    before = await wait_for_groups(cluster, "serve", GROUPS)
    victim = before["1"][2]
    await cluster.delete_pod(victim)

    async def recreated() -> dict[str, list[Pod]] | None:
        groups = await settled_groups(cluster, "serve", GROUPS)
        return groups if groups and not uids(groups["1"]) & uids(before["1"]) else None

    after = await wait_for(recreated, what="group 1 made again")
    assert uids(after["0"]) == uids(before["0"])
    assert uids(after["2"]) == uids(before["2"])
    # The group's identity is its leader's name: the same key again.
    assert after["1"][0].metadata.labels[GROUP_KEY] == before["1"][0].metadata.labels[GROUP_KEY]


@pytest.mark.usefixtures("controllers")
async def test_a_failed_leader_recreates_its_group(cluster: Cluster) -> None:
    body = lws_manifest("serve", replicas=2, size=2)
    await cluster.client.create(LEADER_WORKER_SETS, body, namespace="default")

    async def two_groups() -> dict[str, list[Pod]] | None:
        return await settled_groups(cluster, "serve", 2, size=2)

    before = await wait_for(two_groups, what="two groups of two")
    await cluster.set_phase(before["0"][0], "Failed")

    async def recreated() -> dict[str, list[Pod]] | None:
        groups = await two_groups()
        return groups if groups and not uids(groups["0"]) & uids(before["0"]) else None

    after = await wait_for(recreated, what="group 0 made again")
    assert uids(after["1"]) == uids(before["1"])
