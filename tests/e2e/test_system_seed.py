"""The seed manifests on the whole system, applied unchanged with kubectl: the domain becomes
Ready with its 18 pods in one clique and its channel on every member, scales 18 -> 9 -> 18 in
the same clique and channel, and deleting it leaves nothing behind."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from shared.kube.models import Pod
from tests.e2e.whole_system import (
    EXAMPLES,
    GPUS_PER_NODE,
    NODES_PER_CLIQUE,
    WholeSystem,
    running_whole_system,
)
from tests.support.wait import wait_for

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.slow,
    pytest.mark.timeout(600),
]

SEED = ("-f", str(EXAMPLES / "training-domain-1.yaml"), "-f", str(EXAMPLES / "llm-training.yaml"))
DOMAIN = "training-domain-1"
DEPLOYMENT = "llm-training"
SELECTOR = "app=llm-training"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def system() -> AsyncIterator[WholeSystem]:
    async with running_whole_system() as running:
        yield running


async def apply_seed(system: WholeSystem, namespace: str) -> None:
    await system.create_namespace(namespace)
    await system.kubectl("apply", "-n", namespace, *SEED)


async def cliques_of(system: WholeSystem, pods: list[Pod]) -> set[str]:
    labels = await system.cliques()
    return {labels[pod.spec.node_name] for pod in pods}


async def wait_channel_only_on(system: WholeSystem, channel: int, nodes: set[str]) -> None:
    """Until the channel's device exists on exactly these nodes (the agents add and drop it)."""

    async def exactly() -> bool:
        devices = await system.all_channel_devices()
        return {node for node, channels in devices.items() if channel in channels} == nodes

    await wait_for(exactly, timeout=60, interval=0.3, what=f"channel {channel} on {sorted(nodes)}")


async def test_the_seed_applied_unchanged_is_ready_in_one_clique(system: WholeSystem) -> None:
    await apply_seed(system, "seed")
    domain = await system.wait_domain_ready("seed", DOMAIN, nodes=NODES_PER_CLIQUE)
    pods = await system.wait_running("seed", SELECTOR, 18)

    assert len({pod.spec.node_name for pod in pods}) == 18  # 4 GPUs each: one pod per tray
    (clique,) = await cliques_of(system, pods)
    status = domain.status
    assert status.clique == clique and status.channel is not None
    assert {node.name for node in status.nodes} == {pod.spec.node_name for pod in pods}
    assert {node.clique_id for node in status.nodes} == {clique}
    assert sorted(node.index for node in status.nodes) == list(range(NODES_PER_CLIQUE))
    assert all(node.status == "Ready" and node.ip_address for node in status.nodes)

    placement = await system.placement("seed", DOMAIN)
    assert placement is not None
    assert (placement.spec.clique, placement.spec.channel) == (clique, status.channel)
    assert {pod for member in placement.spec.members for pod in member.pods} == {
        pod.metadata.name for pod in pods
    }
    # The kubelet prepared each pod's claim through the node's IMEX agent: the channel's device.
    member = pods[0].spec.node_name
    assert status.channel in system.channel_devices(member)
    await wait_channel_only_on(system, status.channel, {pod.spec.node_name for pod in pods})

    capacity = await system.capacity()
    assert capacity[clique]["gpus_free"] == 0 and capacity[clique]["domains"] == 1
    await system.clean_up("seed")


async def test_scaling_18_to_9_to_18_keeps_the_clique_and_the_channel(
    system: WholeSystem,
) -> None:
    await apply_seed(system, "elastic")
    full = await system.wait_domain_ready("elastic", DOMAIN, nodes=18)
    clique, channel = full.status.clique, full.status.channel
    assert clique is not None and channel is not None

    await system.scale("elastic", DEPLOYMENT, 9)
    half = await system.wait_running("elastic", SELECTOR, 9)
    shrunk = await system.wait_domain_ready("elastic", DOMAIN, nodes=9)
    assert await cliques_of(system, half) == {clique}
    assert (shrunk.status.clique, shrunk.status.channel) == (clique, channel)

    async def released() -> bool:
        placement = await system.placement("elastic", DOMAIN)
        held = placement.spec.members if placement is not None else ()
        return sum(member.gpus for member in held) == 9 * GPUS_PER_NODE

    await wait_for(released, timeout=60, interval=0.2, what="the reservation shrunk to 9 pods")
    await wait_channel_only_on(system, channel, {pod.spec.node_name for pod in half})

    await system.scale("elastic", DEPLOYMENT, 18)
    again = await system.wait_running("elastic", SELECTOR, 18)
    regrown = await system.wait_domain_ready("elastic", DOMAIN, nodes=18)
    assert await cliques_of(system, again) == {clique}
    assert (regrown.status.clique, regrown.status.channel) == (clique, channel)
    await wait_channel_only_on(system, channel, {pod.spec.node_name for pod in again})
    await system.clean_up("elastic")


async def test_deleting_the_seed_leaves_nothing_behind(system: WholeSystem) -> None:
    await apply_seed(system, "doomed")
    domain = await system.wait_domain_ready("doomed", DOMAIN, nodes=18)
    assert domain.status.channel is not None
    assert await system.all_channel_devices()

    await system.kubectl("delete", "-n", "doomed", *SEED, "--wait=false")
    await system.clean_up("doomed")

    async def nothing_left() -> list[str] | None:
        left = await system.leftovers()
        return None if left else ["clean"]

    try:
        await wait_for(nothing_left, timeout=60, interval=0.3, what="nothing left")
    except AssertionError:
        pytest.fail(f"left behind: {await system.leftovers()}")

    async def all_free() -> dict[str, dict[str, object]] | None:
        capacity = await system.capacity()
        free = all(
            entry["gpus_free"] == NODES_PER_CLIQUE * GPUS_PER_NODE and entry["domains"] == 0
            for entry in capacity.values()
        )
        return capacity if free and len(capacity) == 2 else None

    await wait_for(all_free, timeout=60, interval=0.5, what="every clique's 72 GPUs free")
