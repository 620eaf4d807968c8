"""Per-GPU packing on the simulated 2-rack cluster: one-GPU pods fill whole trays of one rack,
and two domains share a rack's nodes, each with its own IMEX channel."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.integration.clique_allocator.harness import check_no_double_booking
from tests.integration.clique_allocator.system import System, running_system

pytestmark = pytest.mark.asyncio(loop_scope="module")


def domain_and_workload(name: str, *, replicas: int, spread: int | None = None) -> str:
    """A ComputeDomain and a Deployment of one-GPU pods using its claim template; ``spread``:
    the domain's spec.gang.nodes."""
    spread_line = f"\n  gang:\n    nodes: {spread}" if spread else ""
    return f"""
apiVersion: resource.nvidia.com/v1beta1
kind: ComputeDomain
metadata:
  name: {name}
spec:{spread_line}
  channel:
    resourceClaimTemplate:
      name: {name}-rct
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      containers:
        - name: worker
          image: registry.example.com/worker:1.0
          resources:
            limits: {{nvidia.com/gpu: 1}}
            claims: [{{name: imex-channel}}]
      resourceClaims:
        - name: imex-channel
          resourceClaimTemplateName: {name}-rct
"""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def system() -> AsyncIterator[System]:
    async with running_system() as running:
        yield running


async def apply(system: System, namespace: str, manifest: str) -> None:
    path = system.workdir / f"{namespace}-{abs(hash(manifest))}.yaml"
    path.write_text(manifest)
    await system.kubectl("apply", "-n", namespace, "-f", str(path))


async def test_72_one_gpu_pods_fill_one_rack_four_per_node(system: System) -> None:
    await system.create_namespace("packed")
    await apply(system, "packed", domain_and_workload("wide", replicas=72))
    pods = await system.wait_running("packed", "app=wide", 72, within_s=90)
    per_node = Counter(pod.spec.node_name for pod in pods)
    assert len(per_node) == 18 and set(per_node.values()) == {4}
    assert len({system.clique_of(node) for node in per_node}) == 1
    placement = await system.placement("packed", "wide")
    assert placement is not None
    assert [m.gpus for m in placement.spec.slices[0].members] == [4] * 18
    assert [m.slot for m in placement.spec.slices[0].members] == list(range(18))
    await system.delete_everything_in("packed")


async def test_two_domains_of_36_share_nodes_each_with_its_own_channel(system: System) -> None:
    await system.create_namespace("shared")
    for name in ("left", "right"):
        await apply(system, "shared", domain_and_workload(name, replicas=36, spread=18))
    left = await system.wait_running("shared", "app=left", 36, within_s=90)
    right = await system.wait_running("shared", "app=right", 36, within_s=90)
    left_nodes = Counter(pod.spec.node_name for pod in left)
    right_nodes = Counter(pod.spec.node_name for pod in right)
    assert set(left_nodes.values()) == {2} and set(right_nodes.values()) == {2}
    assert set(left_nodes) == set(right_nodes) and len(left_nodes) == 18  # one rack, shared
    a = await system.placement("shared", "left")
    b = await system.placement("shared", "right")
    assert a is not None and b is not None
    assert a.spec.cliques == b.spec.cliques
    assert {a.spec.slices[0].channel, b.spec.slices[0].channel} == {0, 1}
    check_no_double_booking(await system.placements())
    await system.delete_everything_in("shared")
