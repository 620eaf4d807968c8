"""The pods' own constraints on the whole system: the allocator pins a gang only where the
scheduler binds each pod. On a cluster whose GPU nodes are tainted
``nvidia.com/gpu=present:NoSchedule`` (``constraints.yaml``: rack-0, the clique a gang that
ignored its constraints would take first, is also dedicated to another team):

- the seed workload with a toleration for the GPU taint is Ready in rack-1; without it, its pods
  wait, their condition naming the toleration they lack;
- a node-pool selector that half of rack-1's nodes match puts the pods on those nodes only;
- pods that need more memory than most nodes have go to the nodes that have it, as many per
  node as fit.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from shared.crds.names import PLACED_CONDITION
from shared.kube.models import Pod
from tests.e2e.whole_system import (
    EXAMPLES,
    SYSTEM_STEP_S,
    WholeSystem,
    deployment_object,
    domain_object,
    gated,
    running_whole_system,
)
from tests.support.wait import wait_for

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.slow,
    pytest.mark.timeout(900),
]

TOPOLOGY = Path(__file__).with_name("constraints.yaml")
GPU_TAINT = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present",
             "effect": "NoSchedule"}  # fmt: skip
SEED_DOMAIN = "training-domain-1"
SEED_SELECTOR = "app=llm-training"
RACK_1 = "rack-1"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def system() -> AsyncIterator[WholeSystem]:
    async with running_whole_system(topology=TOPOLOGY) as running:
        yield running


def seed(*, tolerate: bool) -> str:
    """The seed manifests, the workload's pods tolerating the GPU taint or not."""
    docs: list[dict[str, Any]] = []
    for name in ("training-domain-1.yaml", "llm-training.yaml"):
        docs.extend(d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d)
    if tolerate:
        for doc in docs:
            if doc["kind"] == "Deployment":
                doc["spec"]["template"]["spec"]["tolerations"] = [GPU_TAINT]
    return "\n---\n".join(json.dumps(doc) for doc in docs)


def workload(name: str, *, replicas: int, gpus: int, **pod_spec: Any) -> list[dict[str, Any]]:
    """A domain and a Deployment whose pods tolerate the GPU taint and carry ``pod_spec``."""
    deployment = deployment_object(name, replicas=replicas, gpus=gpus)
    spec = deployment["spec"]["template"]["spec"]
    spec["tolerations"] = [GPU_TAINT]
    requests = pod_spec.pop("requests", None)
    if requests:
        spec["containers"][0]["resources"]["requests"] = requests
    spec.update(pod_spec)
    return [domain_object(name), deployment]


async def apply(system: WholeSystem, namespace: str, docs: str | list[dict[str, Any]]) -> None:
    await system.create_namespace(namespace)
    text = docs if isinstance(docs, str) else "\n---\n".join(json.dumps(d) for d in docs)
    await system.kubectl("apply", "-n", namespace, "-f", "-", stdin=text)


def racks_of(pods: list[Pod]) -> set[str]:
    return {pod.spec.node_name.rsplit("-tray", 1)[0] for pod in pods}


async def test_the_seed_tolerating_the_gpu_taint_is_ready_where_it_is_tolerated(
    system: WholeSystem,
) -> None:
    await apply(system, "tolerating", seed(tolerate=True))
    await system.wait_domain_ready("tolerating", SEED_DOMAIN, nodes=18)
    pods = await system.wait_running("tolerating", SEED_SELECTOR, 18)
    assert racks_of(pods) == {RACK_1}
    await system.clean_up("tolerating")


async def test_the_seed_without_the_toleration_waits_naming_it(system: WholeSystem) -> None:
    await apply(system, "intolerant", seed(tolerate=False))

    async def held() -> list[Pod] | None:
        pods = await system.pods("intolerant", SEED_SELECTOR)
        waiting = [
            pod
            for pod in pods
            if gated(pod)
            and (c := pod.condition(PLACED_CONDITION)) is not None
            and c.status == "False"
            and c.reason == "PodConstraints"
        ]
        return waiting if len(waiting) == 18 else None

    waiting = await wait_for(held, timeout=SYSTEM_STEP_S, interval=0.3, what="18 pods held")
    condition = waiting[0].condition(PLACED_CONDITION)
    assert condition is not None
    assert "lack the toleration for nvidia.com/gpu=present:NoSchedule" in condition.message
    assert "CliqueFull" not in condition.message
    assert all(not pod.spec.node_name for pod in waiting)
    assert await system.placement("intolerant", SEED_DOMAIN) is None
    await system.clean_up("intolerant")


async def test_a_pool_selector_half_a_clique_matches_puts_pods_on_those_nodes(
    system: WholeSystem,
) -> None:
    docs = workload("pool", replicas=9, gpus=4, nodeSelector={"example.com/pool": "training"})
    await apply(system, "pool", docs)
    await system.wait_domain_ready("pool", "pool", nodes=9)
    pods = await system.wait_running("pool", "app=pool", 9)
    nodes = {pod.spec.node_name: await system.node(pod.spec.node_name) for pod in pods}
    assert len(nodes) == 9
    assert {node.metadata.labels.get("example.com/pool") for node in nodes.values()} == {"training"}
    await system.clean_up("pool")


async def test_memory_heavy_pods_go_where_the_memory_is_as_many_per_node_as_fit(
    system: WholeSystem,
) -> None:
    # 400Gi each: none fits the 256Gi trays 0-11, two fit a 960Gi tray (12-17).
    docs = workload("memory", replicas=6, gpus=1, requests={"memory": "400Gi"})
    await apply(system, "memory", docs)
    await system.wait_domain_ready("memory", "memory", nodes=3)
    pods = await system.wait_running("memory", "app=memory", 6)
    per_node: dict[str, int] = {}
    for pod in pods:
        per_node[pod.spec.node_name] = per_node.get(pod.spec.node_name, 0) + 1
        node = await system.node(pod.spec.node_name)
        assert node.status.allocatable["memory"] == "960Gi"
    assert sorted(per_node.values()) == [2, 2, 2]
    await system.clean_up("memory")
