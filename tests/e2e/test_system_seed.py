"""The seed manifests on the whole system, applied unchanged with kubectl: the domain becomes
Ready with its 18 pods in one clique and its channel on every member, scales 18 -> 9 -> 18 in
the same clique and channel, and deleting it leaves nothing behind. The seed's shape doubled
(36 pods of 4 GPUs, both racks) is one domain in two slices."""

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
    assert (placement.spec.slices[0].clique, placement.spec.slices[0].channel) == (
        clique,
        status.channel,
    )
    assert set(placement.spec.pod_names) == {pod.metadata.name for pod in pods}
    # The kubelet prepared each pod's claim through the node's IMEX agent: the channel's device.
    member = pods[0].spec.node_name
    assert status.channel in system.channel_devices(member)
    await wait_channel_only_on(system, status.channel, {pod.spec.node_name for pod in pods})

    capacity = await system.capacity()
    assert capacity[clique]["gpus_free"] == 0 and capacity[clique]["domains"] == 1
    # The seed was written as v1beta1 and is stored as v1beta2; both read back through the
    # allocator's conversion webhook, with the same status.
    for version in ("v1beta1", "v1beta2"):
        out = await system.kubectl(
            "get", f"computedomains.{version}.resource.nvidia.com", DOMAIN, "-n", "seed",
            "-o", "jsonpath={.apiVersion} {.status.status} {.status.channel}",
        )  # fmt: skip
        assert out == f"resource.nvidia.com/{version} Ready {status.channel}"
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
        return placement is not None and placement.spec.reserved_pods == 9

    await wait_for(released, timeout=60, interval=0.2, what="the reservation shrunk to 9 pods")
    await wait_channel_only_on(system, channel, {pod.spec.node_name for pod in half})

    await system.scale("elastic", DEPLOYMENT, 18)
    again = await system.wait_running("elastic", SELECTOR, 18)
    regrown = await system.wait_domain_ready("elastic", DOMAIN, nodes=18)
    assert await cliques_of(system, again) == {clique}
    assert (regrown.status.clique, regrown.status.channel) == (clique, channel)
    await wait_channel_only_on(system, channel, {pod.spec.node_name for pod in again})
    await system.clean_up("elastic")


DOUBLED = """
apiVersion: resource.nvidia.com/v1beta1
kind: ComputeDomain
metadata:
  name: training-domain-2
spec:
  channel:
    resourceClaimTemplate:
      name: training-domain-2-rct
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm-training-2
spec:
  replicas: 36
  selector:
    matchLabels:
      app: llm-training-2
  template:
    metadata:
      labels:
        app: llm-training-2
    spec:
      containers:
        - name: trainer
          image: registry.example.com/llm-trainer:1.0
          resources:
            limits:
              nvidia.com/gpu: 4
            claims:
              - name: imex-channel
      resourceClaims:
        - name: imex-channel
          resourceClaimTemplateName: training-domain-2-rct
"""


async def test_the_seed_doubled_is_one_domain_in_two_slices_one_per_rack(
    system: WholeSystem,
) -> None:
    """36 pods of 4 GPUs without a slice size: larger than a rack, so the fewest slices, two.
    (The seed's pod affinity on the clique label is left out: it would keep every pod in the
    first pod's clique.)"""
    namespace = "doubled"
    await system.create_namespace(namespace)
    await system.kubectl("apply", "-n", namespace, "-f", "-", stdin=DOUBLED)
    pods = await system.wait_running(namespace, "app=llm-training-2", 36)
    domain = await system.wait_domain_ready(namespace, "training-domain-2", nodes=36)
    placement = await system.placement(namespace, "training-domain-2")
    assert placement is not None
    labels = await system.cliques()
    pieces = placement.spec.slices
    assert [(s.first_rank, s.size, len(s.members)) for s in pieces] == [(0, 18, 18), (18, 18, 18)]
    assert {s.clique for s in pieces} == set(labels.values())
    for piece in pieces:
        assert {labels[m.node] for m in piece.members} == {piece.clique}
    assert await cliques_of(system, pods) == set(labels.values())
    assert sorted(c.clique for c in domain.status.cliques) == sorted(set(labels.values()))
    assert all(c.ready_nodes == c.nodes == 18 for c in domain.status.cliques)
    await system.clean_up(namespace)


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
