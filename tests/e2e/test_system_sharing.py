"""Several domains of small pods share nodes on the whole system, each in one clique with its own
channel and no node over-committed; a job too big for any clique waits, gated, with the reason."""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from shared.crds.names import PLACED_CONDITION
from shared.kube.models import Pod
from tests.e2e.whole_system import (
    GPUS_PER_NODE,
    WholeSystem,
    gated,
    gpus_per_node,
    live,
    reserved_per_node,
    running_whole_system,
    shared_channels,
)
from tests.support.wait import wait_for

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.slow,
    pytest.mark.timeout(600),
]

# name: (pods, GPUs per pod, spec.gang.nodes). The two wide ones take one GPU on each of 18
# nodes, so whichever clique the others land in, they share nodes with a wide one.
DOMAINS = {
    "wide-a": (18, 1, 18),
    "wide-b": (18, 1, 18),
    "pairs": (6, 2, None),
    "singles": (5, 1, None),
}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def system() -> AsyncIterator[WholeSystem]:
    async with running_whole_system() as running:
        yield running


async def test_domains_of_small_pods_share_nodes_each_in_one_clique_with_its_own_channel(
    system: WholeSystem,
) -> None:
    namespace = "sharing"
    await system.create_namespace(namespace)
    for name, (replicas, gpus, spread) in DOMAINS.items():
        await system.create_workload(namespace, name, replicas=replicas, gpus=gpus, spread=spread)
    pods: dict[str, list[Pod]] = {}
    for name, (replicas, _gpus, spread) in DOMAINS.items():
        pods[name] = await system.wait_running(namespace, f"app={name}", replicas)
        nodes = len({pod.spec.node_name for pod in pods[name]})
        domain = await system.wait_domain_ready(namespace, name, nodes=nodes)
        if spread is not None:
            assert nodes == spread
        labels = await system.cliques()
        assert {labels[pod.spec.node_name] for pod in pods[name]} == {domain.status.clique}

    domains_on: dict[str, set[str]] = defaultdict(set)
    for name, members in pods.items():
        for pod in members:
            domains_on[pod.spec.node_name].add(name)
    shared = {node: names for node, names in domains_on.items() if len(names) >= 2}
    assert shared, f"no node hosts two domains: {dict(domains_on)}"

    placements = await system.placements(namespace)
    assert {p.metadata.name for p in placements} == set(DOMAINS)
    assert shared_channels(placements) == []
    channel = {p.metadata.name: p.spec.slices[0].channel for p in placements}
    for node, names in shared.items():
        # Each domain on the node has its own channel's device there.
        assert {channel[name] for name in names} <= system.channel_devices(node)
        assert len({channel[name] for name in names}) == len(names)

    all_pods = await system.pods()
    assert max(gpus_per_node(all_pods).values()) <= GPUS_PER_NODE
    assert max(reserved_per_node(placements).values()) <= GPUS_PER_NODE
    await system.clean_up(namespace)


async def test_domains_too_big_for_the_cluster_or_a_clique_wait_gated_with_the_reason(
    system: WholeSystem,
) -> None:
    namespace = "too-big"
    await system.create_namespace(namespace)
    # 37 whole trays: one more than the cluster has. And a domain asking for 19 nodes: one more
    # than any clique has (19 one-GPU pods fit one clique, so they are not cut into slices).
    await system.create_workload(namespace, "trays", replicas=37, gpus=4)
    await system.create_workload(namespace, "spread", replicas=19, gpus=1, spread=19)
    expected = {
        "trays": (37, "LargerThanCluster", "36"),
        "spread": (19, "LargerThanAnyClique", "18"),
    }

    async def held(name: str) -> list[Pod] | None:
        count, reason, _ = expected[name]
        pods = live(await system.pods(namespace, f"app={name}"))
        waiting = [
            pod
            for pod in pods
            if gated(pod)
            and not pod.spec.node_name
            and (condition := pod.condition(PLACED_CONDITION)) is not None
            and (condition.status, condition.reason) == ("False", reason)
        ]
        return waiting if len(waiting) == count else None

    for name, (count, reason, most) in expected.items():
        waiting = await wait_for(
            functools.partial(held, name),
            timeout=120,
            interval=0.3,
            what=f"{name}'s {count} pods held with a reason",
        )
        condition = waiting[0].condition(PLACED_CONDITION)
        assert condition is not None
        assert most in condition.message, condition.message  # what the cluster or clique has
        assert await system.placement(namespace, name) is None

        domain = await system.domain(namespace, name)
        assert domain is not None and domain.status.status == "NotReady"
        placed = domain.status.condition("Placed")
        assert placed is not None and placed.status == "False"
        described = await system.kubectl("describe", "computedomain", name, "-n", namespace)
        assert reason in described, described

    await system.clean_up(namespace)
