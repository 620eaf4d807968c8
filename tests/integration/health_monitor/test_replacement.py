"""The monitor's reaction moves work: a pod on a GPU fault is replaced in the same clique.

Two simulated nodes of one clique, each with its kubelet and its own health monitor (two
monitors in one process), the simulated scheduler, node lifecycle and workload controllers.
The Deployment's pod is pinned to the clique by the label the monitors maintain, as a
placement would pin it. XID 79 on its node: NoExecute taint, the kubelet evicts, the
Deployment replaces the pod, the scheduler puts it on the other node of the clique. The
clique allocator and the domain controller are not part of this test.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import msgspec
import pytest

from shared.crds.names import CLIQUE_LABEL
from shared.kube.client import KubeClient
from shared.kube.informer import InformerSettings
from shared.kube.models import Pod
from shared.kube.resources import DEPLOYMENTS, PODS
from sim.controllers import ControllerManager
from sim.kubelet import (
    KubeletSettings,
    LifecycleSettings,
    NodeLifecycleController,
    SimulatedKubelet,
)
from sim.scheduler import Scheduler, SchedulerSettings
from sim.topology import Cluster
from tests.conftest import BusFactory
from tests.integration.health_monitor.harness import Harness, running_monitor
from tests.support.arbiter import Arbiter
from tests.support.tasks import running
from tests.support.wait import wait_for

pytestmark = pytest.mark.timeout(60)

NAMESPACE = "default"
INFORMERS = InformerSettings(backoff_initial_s=0.05, backoff_max_s=0.5)
KUBELET = KubeletSettings(
    lease_duration_s=1,
    heartbeat_interval_s=0.2,
    status_update_interval_s=0.5,
    retry_backoff_s=0.05,
    retry_backoff_max_s=0.5,
    plugin_scan_interval_s=0.05,
)


class PodList(msgspec.Struct):
    items: list[Pod]


async def trainer_pods(client: KubeClient) -> list[Pod]:
    raw = await client.list(PODS, namespace=NAMESPACE, label_selector="app=trainer")
    return msgspec.json.decode(raw, type=PodList).items


def deployment(clique: str) -> dict[str, object]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "trainer", "namespace": NAMESPACE},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "trainer"}},
            "template": {
                "metadata": {"labels": {"app": "trainer"}},
                "spec": {
                    "nodeSelector": {CLIQUE_LABEL: clique},
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.test/train:1",
                            "resources": {"limits": {"nvidia.com/gpu": "4"}},
                        }
                    ],
                },
            },
        },
    }


async def test_a_pod_on_a_faulted_gpu_is_replaced_in_the_same_clique(
    kube_client: KubeClient,
    cluster: Cluster,
    bus_factory: BusFactory,
    tmp_path: Path,
    arbiter: Arbiter,
) -> None:
    await arbiter.start()  # the circuit breaker's, as the clique allocator's leader runs it
    publisher = await bus_factory("health-monitor")
    subscriber = await bus_factory("observer")
    nodes = cluster.nodes[:2]
    scheduler = Scheduler(
        kube_client,
        settings=SchedulerSettings(backoff_initial_s=0.1, backoff_max_s=0.5, informer=INFORMERS),
    )
    lifecycle = NodeLifecycleController(
        client=kube_client,
        settings=LifecycleSettings(node_monitor_grace_s=5.0, default_toleration_s=1),
        informer_settings=INFORMERS,
    )
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(running(scheduler.run(), "scheduler"))
        await stack.enter_async_context(running(lifecycle.run(), "node lifecycle"))
        await stack.enter_async_context(ControllerManager(kube_client).running())
        monitors: dict[str, Harness] = {}
        for node in nodes:
            kubelet = SimulatedKubelet(
                node,
                client=kube_client,
                plugins_dir=tmp_path / node.name / "plugins_registry",
                settings=KUBELET,
                informer_settings=INFORMERS,
            )
            await stack.enter_async_context(running(kubelet.run(), f"kubelet {node.name}"))
            monitors[node.name] = await stack.enter_async_context(
                running_monitor(
                    topology=node, client=kube_client, publisher=publisher, subscriber=subscriber
                )
            )
        for harness in monitors.values():
            await harness.settled()  # registered by its kubelet, labelled by its monitor

        clique = monitors[nodes[0].name].clique
        await kube_client.create(DEPLOYMENTS, deployment(clique), namespace=NAMESPACE)

        async def one_running() -> Pod | None:
            live = [p for p in await trainer_pods(kube_client) if p.status.phase == "Running"]
            return live[0] if len(live) == 1 else None

        original = await wait_for(one_running, timeout=20, what="the trainer Running")
        faulted = monitors[original.spec.node_name]
        faulted.sim.raise_xid(0, 79)  # the GPU fell off the bus, and stays off
        faulted.sim.set_gpu_lost(0)

        async def replaced() -> Pod | None:
            for pod in await trainer_pods(kube_client):
                fresh = pod.metadata.uid != original.metadata.uid
                if fresh and pod.status.phase == "Running" and not pod.metadata.deletion_timestamp:
                    return pod
            return None

        replacement = await wait_for(replaced, timeout=20, what="a replacement Running")
        assert replacement.spec.node_name != original.spec.node_name
        assert {(f.signal, f.severity) for f in faulted.faults()} == {
            ("xid", "fatal"),
            ("gpu_lost", "fatal"),
        }
        taint = await faulted.fault_taint()
        assert taint is not None
        assert taint.effect == "NoExecute"
        healthy = monitors[replacement.spec.node_name]
        assert (await healthy.node()).metadata.labels[CLIQUE_LABEL] == clique
        assert healthy.faults() == []
