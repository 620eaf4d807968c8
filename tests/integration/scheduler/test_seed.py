"""The seed workload's shape: 18 pods x 4 GPUs with required pod affinity on the clique label,
over two cliques of 18 four-GPU nodes, created at once. All must land in one clique."""

from __future__ import annotations

import asyncio

from shared.kube.client import KubeClient
from shared.kube.resources import PODS
from sim.kubeapi import KubeServer
from sim.scheduler import Scheduler
from tests.integration.scheduler.cluster import (
    CLIQUE,
    NAMESPACE,
    create_node,
    create_pod,
    get_pod,
    node,
    pod,
    wait_bound,
    wait_unschedulable,
)
from tests.support.wait import wait_for

CLUSTER_UUIDS = ("6f1c2a4e-0000-4000-8000-00000000000a", "6f1c2a4e-0000-4000-8000-00000000000b")
GROUP = {"app": "seed"}
AFFINITY = {
    "podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": CLIQUE, "labelSelector": {"matchLabels": GROUP}}
        ]
    }
}


async def test_eighteen_four_gpu_pods_with_clique_affinity_share_one_clique(
    kube_client: KubeClient, scheduler: Scheduler
) -> None:
    clique_of: dict[str, str] = {}
    for rack, uuid in enumerate(CLUSTER_UUIDS):
        for tray in range(18):
            name = f"rack{rack}-tray{tray:02d}"
            clique_of[name] = f"{uuid}.0"
            await create_node(kube_client, node(name, gpus=4, labels={CLIQUE: clique_of[name]}))
    await asyncio.gather(
        *(
            create_pod(kube_client, pod(f"seed-{i}", labels=GROUP, gpus=4, affinity=AFFINITY))
            for i in range(18)
        )
    )
    nodes = [await wait_bound(kube_client, f"seed-{i}") for i in range(18)]
    assert len(set(nodes)) == 18
    assert len({clique_of[n] for n in nodes}) == 1

    await create_pod(kube_client, pod("seed-18", labels=GROUP, gpus=4, affinity=AFFINITY))
    message = await wait_unschedulable(kube_client, "seed-18")
    assert message == (
        "0/36 nodes are available: 18 Insufficient nvidia.com/gpu, "
        "18 node(s) didn't match pod affinity rules."
    )


async def placement(client: KubeClient, name: str) -> str | None:
    """The pod's node, "-" once it is reported unschedulable, or None while undecided."""
    got = await get_pod(client, name)
    if got.spec.node_name:
        return got.spec.node_name
    condition = got.condition("PodScheduled")
    return "-" if condition is not None and condition.reason == "Unschedulable" else None


async def test_gpus_are_never_overcommitted_under_a_burst(
    kube_client: KubeClient, scheduler: Scheduler
) -> None:
    for i in range(3):
        await create_node(kube_client, node(f"n{i}", gpus=4))
    names = [f"p{i:02d}" for i in range(14)]
    await asyncio.gather(*(create_pod(kube_client, pod(name, gpus=1)) for name in names))

    async def all_decided() -> list[str] | None:
        placed = [await placement(kube_client, name) for name in names]
        return None if None in placed else [p for p in placed if p is not None]

    placed = await wait_for(all_decided, what="every pod bound or refused")
    assert sorted(placed) == ["-"] * 2 + ["n0"] * 4 + ["n1"] * 4 + ["n2"] * 4


async def test_a_failed_binding_releases_what_it_assumed(
    emulator: KubeServer, kube_client: KubeClient, scheduler: Scheduler
) -> None:
    await create_node(kube_client, node("n1", gpus=4))
    await create_pod(kube_client, pod("unlucky", gpus=4, gates=["test/hold"]))
    emulator.faults.fail_next(1, code=500, verbs=["create"], resource="pods")
    await kube_client.patch(
        PODS, "unlucky", {"spec": {"schedulingGates": None}}, namespace=NAMESPACE
    )
    assert await wait_bound(kube_client, "unlucky") == "n1"
    assert scheduler.stats.bind_failures == 1
    # the failed attempt's assumption is gone: the node counts the pod's GPUs once
    assert scheduler.state.usage("n1").requested["nvidia.com/gpu"] == 4000
