"""Node failures on the simulated cluster: a gang's replacement pod stays in its clique, on a
healthy node, or waits there with a reason until a node comes back."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from shared.crds.names import PLACED_CONDITION
from shared.kube.models import Pod
from tests.integration.clique_allocator.harness import check_no_double_booking, gated
from tests.integration.clique_allocator.system import System, running_system
from tests.support.wait import wait_for

pytestmark = pytest.mark.asyncio(loop_scope="module")

DOMAIN = "trainer"
SELECTOR = f"app={DOMAIN}"


def manifest(replicas: int) -> str:
    """A domain and a workload of 4-GPU pods that leave a dead node after 2 s, not 300."""
    return f"""
apiVersion: resource.nvidia.com/v1beta1
kind: ComputeDomain
metadata:
  name: {DOMAIN}
spec:
  channel:
    resourceClaimTemplate:
      name: {DOMAIN}-rct
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {DOMAIN}
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: {DOMAIN}}}
  template:
    metadata:
      labels: {{app: {DOMAIN}}}
    spec:
      tolerations:
        - {{key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute,
            tolerationSeconds: 2}}
        - {{key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute,
            tolerationSeconds: 2}}
      containers:
        - name: trainer
          image: registry.example.com/llm-trainer:1.0
          resources:
            limits: {{nvidia.com/gpu: 4}}
            claims: [{{name: imex-channel}}]
      resourceClaims:
        - name: imex-channel
          resourceClaimTemplateName: {DOMAIN}-rct
"""


async def apply(system: System, namespace: str, replicas: int) -> None:
    await system.create_namespace(namespace)
    path = system.workdir / f"{namespace}.yaml"
    path.write_text(manifest(replicas))
    await system.kubectl("apply", "-n", namespace, "-f", str(path))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def system() -> AsyncIterator[System]:
    async with running_system() as running:
        yield running


async def live(system: System, namespace: str) -> list[Pod]:
    return [
        pod
        for pod in await system.pods(namespace, SELECTOR)
        if pod.metadata.deletion_timestamp is None
    ]


async def test_a_replacement_stays_in_the_clique_and_waits_there_for_a_healthy_node(
    system: System,
) -> None:
    await apply(system, "faults", 18)
    before = await system.wait_running("faults", SELECTOR, 18)
    clique = {system.clique_of(pod.spec.node_name) for pod in before}
    assert len(clique) == 1
    victim = before[0].spec.node_name

    system.cluster.power_off(victim)

    async def waiting() -> Pod | None:
        for pod in await live(system, "faults"):
            condition = pod.condition(PLACED_CONDITION)
            if gated(pod) and condition is not None and condition.reason == "CliqueFull":
                return pod
        return None

    # The whole rack is the gang's: no healthy node is left in its clique, and the empty rack
    # next door is not an option.
    replacement = await wait_for(waiting, timeout=60, interval=0.1, what="replacement waits")
    condition = replacement.condition(PLACED_CONDITION)
    assert condition is not None and clique.copy().pop() in condition.message
    placement = await system.placement("faults", DOMAIN)
    assert placement is not None and victim not in set(placement.spec.nodes)

    system.cluster.power_on(victim)
    after = await system.wait_running("faults", SELECTOR, 18, within_s=90)
    assert {system.clique_of(pod.spec.node_name) for pod in after} == clique
    assert replacement.metadata.name in {pod.metadata.name for pod in after}
    assert {pod.spec.node_name for pod in after} == {pod.spec.node_name for pod in before}
    check_no_double_booking(await system.placements())
    await system.delete_everything_in("faults")


async def test_a_replacement_goes_to_a_healthy_node_of_the_same_clique(system: System) -> None:
    await apply(system, "small", 4)
    before = await system.wait_running("small", SELECTOR, 4)
    clique = {system.clique_of(pod.spec.node_name) for pod in before}
    victim = before[0].spec.node_name
    system.cluster.power_off(victim)

    async def moved() -> list[Pod] | None:
        now = await system.running("small", SELECTOR, 4)
        if now is None or victim in {pod.spec.node_name for pod in now}:
            return None
        return now

    after = await wait_for(moved, timeout=60, interval=0.1, what="replacement running elsewhere")
    assert {system.clique_of(pod.spec.node_name) for pod in after} == clique
    system.cluster.power_on(victim)
    await system.delete_everything_in("small")
