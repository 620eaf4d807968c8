"""GPUs through NVIDIA's GPU DRA driver on the whole system, manifests applied with kubectl, on
tests/e2e/dra-gpus.yaml: rack-0 offers its GPUs only through DRA, rack-1 through both the
device plugin and DRA (the same GPUs).

- the example domain whose pods ask for 4 GPUs each with a ``gpu.nvidia.com`` claim becomes
  Ready, its pods in one clique, each pod's claim allocated 4 GPU devices of its own node;
- a domain mixing both ways (2 pods with ``nvidia.com/gpu: 2``, 2 with a claim of 2 GPUs) goes
  to rack-1, the only rack serving both, and fills it; a later device-plugin pod then waits
  although each rack-1 node still shows allocatable ``nvidia.com/gpu`` the device-plugin pods do
  not use (its GPUs are held through DRA), and is placed there once the mixed domain is gone.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from shared.crds import COMPUTE_DOMAINS
from shared.crds.names import DOMAIN_LABEL, PLACED_CONDITION
from shared.kube.models import Pod
from shared.kube.resources import DEPLOYMENTS, RESOURCE_CLAIM_TEMPLATES
from tests.e2e.whole_system import (
    EXAMPLES,
    SYSTEM_STEP_S,
    WholeSystem,
    claim_devices,
    deployment_object,
    domain_object,
    dra_deployment,
    gpu_template,
    running_whole_system,
)
from tests.support.wait import wait_for

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.slow,
    pytest.mark.timeout(600),
]

TOPOLOGY = Path(__file__).with_name("dra-gpus.yaml")
EXAMPLE = EXAMPLES / "dra-gpu-training.yaml"
GPUS_PER_NODE = 4


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def system() -> AsyncIterator[WholeSystem]:
    async with running_whole_system(topology=TOPOLOGY) as running:
        yield running


def plugin_deployment(name: str, domain: str, *, replicas: int, gpus: int) -> dict[str, Any]:
    body = deployment_object(name, replicas=replicas, gpus=gpus)
    claims = body["spec"]["template"]["spec"]["resourceClaims"]
    claims[0]["resourceClaimTemplateName"] = f"{domain}-rct"
    return body


async def running_pods(system: WholeSystem, namespace: str, count: int) -> list[Pod]:
    async def all_running() -> list[Pod] | None:
        pods = [p for p in await system.pods(namespace) if p.metadata.deletion_timestamp is None]
        running = [p for p in pods if p.status.phase == "Running"]
        return running if len(running) == count else None

    found: list[Pod] = await wait_for(
        all_running, timeout=SYSTEM_STEP_S, interval=0.3, what=f"{count} pods running"
    )
    return found


async def gpus_held(system: WholeSystem, pods: list[Pod]) -> dict[str, int]:
    """GPUs held per node through both ways: nvidia.com/gpu requests and claimed devices."""
    claims = {c.metadata.name: c for c in await system.claims(pods[0].metadata.namespace)}
    held: dict[str, int] = defaultdict(int)
    for pod in pods:
        held[pod.spec.node_name] += pod.gpus() + len(claim_devices(pod, claims))
    return dict(held)


async def clean_up(system: WholeSystem, namespace: str) -> None:
    await system.kubectl(
        "delete", "resourceclaimtemplates", "-l", f"!{DOMAIN_LABEL}",
        "-n", namespace, "--wait=false",
    )  # fmt: skip
    await system.clean_up(namespace)


async def test_a_domain_whose_pods_take_gpus_through_dra(system: WholeSystem) -> None:
    namespace = "dra-only"
    await system.create_namespace(namespace)
    await system.kubectl("apply", "-n", namespace, "-f", str(EXAMPLE))
    await system.wait_domain_ready(namespace, "dra-training")
    pods = await running_pods(system, namespace, 2)
    cliques = await system.cliques()
    assert len({cliques[pod.spec.node_name] for pod in pods}) == 1
    claims = {c.metadata.name: c for c in await system.claims(namespace)}
    for pod in pods:
        devices = claim_devices(pod, claims)
        assert len(devices) == GPUS_PER_NODE, pod.metadata.name
        assert {pool for pool, _ in devices} == {pod.spec.node_name}
        assert pod.gpus() == 0  # no nvidia.com/gpu: the claim is the pod's only GPU ask
    placement = await system.placement(namespace, "dra-training")
    assert placement is not None and placement.spec.gpus_per_pod == GPUS_PER_NODE
    await clean_up(system, namespace)


async def test_a_domain_mixing_both_ways_is_never_over_committed(system: WholeSystem) -> None:
    namespace = "mixed"
    await system.create_namespace(namespace)
    client = system.client
    await client.create(COMPUTE_DOMAINS, domain_object("mixed"), namespace=namespace)
    await client.create(RESOURCE_CLAIM_TEMPLATES, gpu_template("two-gpus", 2), namespace=namespace)
    await client.create(
        DEPLOYMENTS, plugin_deployment("dp", "mixed", replicas=2, gpus=2), namespace=namespace
    )
    await client.create(
        DEPLOYMENTS,
        dra_deployment("dra", "mixed", replicas=2, template="two-gpus"),
        namespace=namespace,
    )
    await system.wait_domain_ready(namespace, "mixed")
    pods = await running_pods(system, namespace, 4)
    rack_1 = {"rack-1-tray00", "rack-1-tray01"}
    assert {pod.spec.node_name for pod in pods} <= rack_1
    assert await gpus_held(system, pods) == dict.fromkeys(rack_1, GPUS_PER_NODE)

    # rack-1 is full through both ways; rack-0 serves no device-plugin pod.
    late = "late"
    await client.create(COMPUTE_DOMAINS, domain_object(late), namespace=namespace)
    await client.create(
        DEPLOYMENTS, plugin_deployment(late, late, replicas=1, gpus=2), namespace=namespace
    )

    async def held_back() -> Pod | None:
        found = await system.pods(namespace, f"app={late}")
        waiting = [p for p in found if (c := p.condition(PLACED_CONDITION)) and c.status == "False"]
        return waiting[0] if waiting else None

    waiting = await wait_for(held_back, timeout=SYSTEM_STEP_S, interval=0.3, what="late waits")
    assert not waiting.spec.node_name
    await system.kubectl("delete", "deployments", "dp", "dra", "-n", namespace, "--wait=false")
    await system.kubectl("delete", "computedomains", "mixed", "-n", namespace, "--wait=false")

    async def placed() -> list[Pod] | None:
        found = await system.pods(namespace, f"app={late}")
        running = [p for p in found if p.status.phase == "Running"]
        return running or None

    moved = await wait_for(placed, timeout=SYSTEM_STEP_S, interval=0.3, what="late placed")
    assert moved[0].spec.node_name in rack_1
    await clean_up(system, namespace)
