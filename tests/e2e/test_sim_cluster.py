"""The simulated cluster end to end: the seed workload applied with real kubectl is scheduled in
one clique, its claims allocated from per-node ResourceSlices and prepared by a DRA plugin over
gRPC on every node; a powered-off node's pods are replaced elsewhere."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path

import msgspec
import pytest

from shared.kube.client import KubeClient
from shared.kube.models import Pod
from shared.kube.resources import DEVICE_CLASSES, PODS, RESOURCE_CLAIM_TEMPLATES, RESOURCE_SLICES
from shared.kubeletapi import (
    Claim,
    KubeletPlugin,
    PluginPaths,
    PreparedDevice,
    PrepareResult,
    UnprepareResult,
)
from sim.cluster import CLIQUE_LABEL, ClusterOptions, SimulatedCluster
from sim.kubelet import KubeletSettings, LifecycleSettings
from tests.support.wait import wait_for

DRIVER = "compute-domain.cdo.dev"
EXAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "examples"
KUBECTL = Path(sys.executable).parent / "kubectl"


class PodList(msgspec.Struct):
    items: list[Pod]


class EchoChannelDriver:
    """A stand-in for the IMEX agent's plugin: every claim gets one CDI device of its node."""

    def __init__(self, node: str) -> None:
        self.node = node

    async def prepare(self, claims: Sequence[Claim]) -> Mapping[str, PrepareResult]:
        return {
            claim.uid: PrepareResult(
                devices=(
                    PreparedDevice(
                        pool_name=self.node,
                        device_name="attach-0",
                        cdi_device_ids=(f"cdo.dev/imex-channel={claim.name}",),
                    ),
                )
            )
            for claim in claims
        }

    async def unprepare(self, claims: Sequence[Claim]) -> Mapping[str, UnprepareResult]:
        return {claim.uid: UnprepareResult() for claim in claims}


async def publish_channel_devices(client: KubeClient, cluster: SimulatedCluster) -> None:
    """What the domain controller and the IMEX agents will publish: a DeviceClass, a claim
    template, and per node a ResourceSlice of attachment devices."""
    await client.create(
        DEVICE_CLASSES,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "compute-domain-channel.cdo.dev"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
    )
    await client.create(
        RESOURCE_CLAIM_TEMPLATES,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "training-domain-1-rct", "namespace": "default"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "channel",
                                "exactly": {"deviceClassName": "compute-domain-channel.cdo.dev"},
                            }
                        ]
                    }
                }
            },
        },
        namespace="default",
    )
    for node in cluster.topology.nodes:
        await client.create(
            RESOURCE_SLICES,
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{node.name}-{DRIVER}"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": node.name,
                    "pool": {"name": node.name, "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": f"attach-{i}"} for i in range(4)],
                },
            },
        )


@pytest.fixture
async def cluster() -> AsyncIterator[SimulatedCluster]:
    state = Path(tempfile.mkdtemp(prefix="cdo-sim-"))  # short: unix socket paths are limited
    options = ClusterOptions(
        state_dir=state,
        label_cliques=True,
        kubelet=KubeletSettings(lease_duration_s=4, heartbeat_interval_s=0.5),
        lifecycle=LifecycleSettings(node_monitor_grace_s=2, default_toleration_s=1),
    )
    try:
        async with (
            SimulatedCluster.running(options) as running,
            contextlib.AsyncExitStack() as plugins,
        ):
            for node in running.topology.nodes:
                plugin = KubeletPlugin(
                    driver_name=DRIVER,
                    handler=EchoChannelDriver(node.name),
                    paths=PluginPaths.for_driver(
                        DRIVER, kubelet_root=running.fleet.kubelet_root(node.name)
                    ),
                )
                await plugins.enter_async_context(plugin)
            yield running
    finally:
        shutil.rmtree(state, ignore_errors=True)


async def pods(client: KubeClient, selector: str) -> list[Pod]:
    raw = await client.list(PODS, namespace="default", label_selector=selector)
    return msgspec.json.decode(raw, type=PodList).items


def running(pod: Pod) -> bool:
    return pod.status.phase == "Running" and pod.metadata.deletion_timestamp is None


async def kubectl(cluster: SimulatedCluster, *args: str) -> str:
    process = await asyncio.create_subprocess_exec(
        str(KUBECTL), "--kubeconfig", str(cluster.kubeconfig), *args,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await process.communicate()
    assert process.returncode == 0, out.decode()
    return out.decode()


async def test_seed_workload_runs_in_one_clique_with_prepared_claims(
    cluster: SimulatedCluster,
) -> None:
    client = cluster.client
    await publish_channel_devices(client, cluster)
    await kubectl(cluster, "apply", "-f", str(EXAMPLES / "llm-training.yaml"))

    async def all_running() -> list[Pod] | None:
        found = await pods(client, "app=llm-training")
        return found if len(found) == 18 and all(map(running, found)) else None

    placed = await wait_for(all_running, timeout=90, what="18 pods running")
    nodes = {pod.spec.node_name for pod in placed}
    assert len(nodes) == 18  # 4 GPUs each: one pod per tray
    cliques = {cluster.topology.node(name).clique for name in nodes}
    assert len(cliques) == 1
    for pod in placed:
        assert pod.metadata.annotations["sim.cdo.dev/cdi-devices"].startswith('["cdo.dev/')
    listed = await kubectl(cluster, "get", "nodes", "-L", CLIQUE_LABEL)
    assert cliques.pop() in listed


async def test_a_powered_off_node_goes_not_ready_and_its_pods_move(
    cluster: SimulatedCluster,
) -> None:
    client = cluster.client
    web = EXAMPLES.parent.parent / "tests" / "e2e" / "web.yaml"
    await kubectl(cluster, "apply", "-f", str(web))
    first = await wait_for(lambda: _two_running(client), timeout=60, what="two web pods running")
    victim = first[0].spec.node_name
    cluster.power_off(victim)
    await wait_for(lambda: _not_ready(cluster, victim), timeout=30, what=f"{victim} NotReady")

    async def moved() -> list[Pod] | None:
        now = await _two_running(client)
        return now if now and victim not in {p.spec.node_name for p in now} else None

    await wait_for(moved, timeout=60, what="pods replaced on other nodes")


async def _two_running(client: KubeClient) -> list[Pod] | None:
    found = [pod for pod in await pods(client, "app=web") if running(pod)]
    return found if len(found) == 2 else None


async def _not_ready(cluster: SimulatedCluster, node: str) -> bool:
    return node not in await cluster.ready_nodes()
