"""A fault of one GPU of a node two domains share, on the whole system (tests/e2e/gpu-faults.yaml):
XID 79 (fallen off the bus, fatal, about that GPU alone) on GPU 2 of the node.

- device-plugin GPUs (rack-0): the node's device plugin marks the GPU Unhealthy (allocatable
  nvidia.com/gpu 4 -> 3), the health monitor evicts the pod its kubelet's PodResources API shows
  holding it; the replacement runs on the node's free healthy GPU, never GPU 2;
- DRA GPUs (rack-1): the monitor's DeviceTaintRule NoExecute on ``gpu-2`` evicts the pod whose
  claim holds it; the replacement's claim gets another device.

Either way the other domain keeps its pods (same UIDs) and stays Ready, and the node is never
tainted.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path

import pytest
import pytest_asyncio

from shared.crds import COMPUTE_DOMAINS
from shared.crds.names import GPU_FAULT_TAINT, gpu_device_name
from shared.kube.models import Pod
from shared.kube.resources import DEPLOYMENTS, RESOURCE_CLAIM_TEMPLATES
from sim import control as simctl
from sim.kubelet.names import DEVICE_ENVS_ANNOTATION
from sim.topology import load_topology
from tests.e2e.whole_system import (
    SYSTEM_STEP_S,
    WholeSystem,
    claim_devices,
    domain_object,
    dra_deployment,
    gpu_template,
    live,
    running_whole_system,
)
from tests.support.wait import wait_for

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.slow,
    pytest.mark.timeout(600),
]

TOPOLOGY = Path(__file__).with_name("gpu-faults.yaml")
PLUGIN_NODE, DRA_NODE = "rack-0-tray00", "rack-1-tray00"
FAULTED_GPU = 2
GPU = "nvidia.com/gpu"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def system() -> AsyncIterator[WholeSystem]:
    async with running_whole_system(topology=TOPOLOGY) as running:
        yield running


def uuids(node: str) -> list[str]:
    (found,) = [n for n in load_topology(TOPOLOGY).nodes if n.name == node]
    return [gpu.uuid for gpu in found.gpus]


def visible_devices(pod: Pod) -> str:
    """What the device plugin's Allocate gave the pod's container (NVIDIA_VISIBLE_DEVICES)."""
    envs = json.loads(pod.metadata.annotations.get(DEVICE_ENVS_ANNOTATION, "{}"))
    return ",".join(env.get("NVIDIA_VISIBLE_DEVICES", "") for env in envs.values())


async def node_state(system: WholeSystem, node: str) -> tuple[str | None, bool]:
    """The node's allocatable nvidia.com/gpu and whether it carries the fault taint."""
    found = await system.node(node)
    tainted = any(taint.key == GPU_FAULT_TAINT for taint in found.spec.taints)
    return found.status.allocatable.get(GPU), tainted


async def inject_xid(system: WholeSystem, node: str, gpu: int, xid: int) -> None:
    body = {"kind": "xid", "gpu": gpu, "xid": xid}
    await asyncio.to_thread(simctl.fault, system.state_dir, node, body, say=lambda _line: None)


async def running(system: WholeSystem, namespace: str, app: str, count: int) -> list[Pod]:
    return await system.wait_running(namespace, f"app={app}", count)


async def replaced(
    system: WholeSystem, namespace: str, app: str, gone: str, check: Callable[[Pod], bool]
) -> Pod:
    """The one running pod of ``app`` once ``gone`` has left and it passes ``check``."""

    async def replacement() -> Pod | None:
        pods = live(await system.pods(namespace, f"app={app}"))
        if len(pods) != 1 or pods[0].metadata.uid == gone or pods[0].status.phase != "Running":
            return None
        return pods[0] if check(pods[0]) else None

    found: Pod = await wait_for(
        replacement, timeout=SYSTEM_STEP_S, interval=0.3, what=f"{app} replaced"
    )
    return found


async def assert_undisturbed(
    system: WholeSystem, namespace: str, app: str, before: Iterable[Pod]
) -> None:
    now = await running(system, namespace, app, 2)
    assert {p.metadata.uid for p in now} == {p.metadata.uid for p in before}
    domain = await system.domain(namespace, app)
    assert domain is not None and domain.status.status == "Ready"


async def test_a_device_plugin_gpu_fault_disturbs_only_the_domain_holding_it(
    system: WholeSystem,
) -> None:
    namespace = "plugin-gpus"
    ids = uuids(PLUGIN_NODE)
    await system.create_namespace(namespace)
    await system.create_workload(namespace, "alpha", replicas=2, gpus=1)
    alpha = await running(system, namespace, "alpha", 2)
    await system.create_workload(namespace, "beta", replicas=1, gpus=1)
    (beta,) = await running(system, namespace, "beta", 1)
    await system.wait_domain_ready(namespace, "beta")
    assert {p.spec.node_name for p in [*alpha, beta]} == {PLUGIN_NODE}
    # The kubelet hands out the lowest free healthy GPUs: alpha 0 and 1, beta 2.
    assert sorted(visible_devices(p) for p in alpha) == sorted(ids[:2])
    assert visible_devices(beta) == ids[FAULTED_GPU]
    assert await node_state(system, PLUGIN_NODE) == ("4", False)

    await inject_xid(system, PLUGIN_NODE, FAULTED_GPU, 79)

    after = await replaced(
        system, namespace, "beta", beta.metadata.uid, lambda p: p.spec.node_name == PLUGIN_NODE
    )
    assert visible_devices(after) == ids[3]  # the free healthy GPU, not GPU 2
    assert await node_state(system, PLUGIN_NODE) == ("3", False)
    await system.wait_domain_ready(namespace, "beta")
    await assert_undisturbed(system, namespace, "alpha", alpha)
    await system.clean_up(namespace)
    assert await system.leftovers() == []


async def create_dra_workload(system: WholeSystem, namespace: str, name: str, pods: int) -> None:
    client = system.client
    await client.create(COMPUTE_DOMAINS, domain_object(name), namespace=namespace)
    await client.create(
        DEPLOYMENTS,
        dra_deployment(name, name, replicas=pods, template="one-gpu"),
        namespace=namespace,
    )


async def test_a_dra_gpu_fault_disturbs_only_the_domain_holding_it(system: WholeSystem) -> None:
    namespace = "dra-gpus"
    await system.create_namespace(namespace)
    await system.client.create(
        RESOURCE_CLAIM_TEMPLATES, gpu_template("one-gpu", 1), namespace=namespace
    )
    await create_dra_workload(system, namespace, "alpha", 2)
    alpha = await running(system, namespace, "alpha", 2)
    await create_dra_workload(system, namespace, "beta", 1)
    (beta,) = await running(system, namespace, "beta", 1)
    await system.wait_domain_ready(namespace, "beta")
    claims = {c.metadata.name: c for c in await system.claims(namespace)}
    faulted = (DRA_NODE, gpu_device_name(FAULTED_GPU))
    assert {p.spec.node_name for p in [*alpha, beta]} == {DRA_NODE}
    assert claim_devices(beta, claims) == [faulted]
    assert all(faulted not in claim_devices(p, claims) for p in alpha)

    await inject_xid(system, DRA_NODE, FAULTED_GPU, 79)

    after = await replaced(system, namespace, "beta", beta.metadata.uid, lambda _p: True)
    claims = {c.metadata.name: c for c in await system.claims(namespace)}
    devices = claim_devices(after, claims)
    assert len(devices) == 1 and faulted not in devices
    assert after.spec.node_name == DRA_NODE
    assert (await node_state(system, DRA_NODE))[1] is False
    await system.wait_domain_ready(namespace, "beta")
    await assert_undisturbed(system, namespace, "alpha", alpha)
    await system.kubectl("delete", "resourceclaimtemplates", "one-gpu", "-n", namespace)
    await system.clean_up(namespace)
    assert await system.leftovers() == []
