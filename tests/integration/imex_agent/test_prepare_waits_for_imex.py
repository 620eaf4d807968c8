"""No container starts without IMEX: prepare while the node's daemon is down, then once READY.

One node's agent runs in this process and drives its simulated ``nvidia-imex`` as a real
subprocess. The test SIGKILLs that process; the agent restarts it after
``restart_backoff_initial_s`` (set long enough to prepare in between), and the daemon is READY
again once ``nvidia-imex-ctl`` says so. The kubelet's side is the plugin client over the unix
socket, and in the last test the simulated kubelet running a pod.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from typing import Any

import msgspec

from services.imex_agent import ImexAgent
from services.imex_agent.readiness import imex_refusal
from services.imex_agent.status import Phase
from shared.crds.names import CLIQUE_LABEL
from shared.kube.client import KubeClient
from shared.kube.informer import InformerSettings
from shared.kube.models import Pod
from shared.kube.resources import PODS, RESOURCE_CLAIMS
from shared.kubeletapi import Claim, DraPluginClient, PrepareResult
from sim.kubelet import CDI_DEVICES_ANNOTATION, KubeletSettings, SimulatedKubelet
from tests.integration.imex_agent.harness import (
    Domain,
    ImexCluster,
    SimNode,
    create_claim,
    create_domain,
    seat_pod,
)
from tests.support.tasks import running
from tests.support.wait import wait_for

NOT_READY = "IMEX is not ready on node"


def configure(sim: SimNode, *, ready_wait_s: float, restart_after_s: float) -> None:
    sim.dra_overrides = {"ready_wait_s": ready_wait_s}
    sim.imex_overrides = {
        "restart_backoff_initial_s": restart_after_s,
        "restart_backoff_max_s": restart_after_s,
    }


async def imex_ready(cluster: ImexCluster, agent: ImexAgent) -> None:
    def ready() -> bool:
        cluster.check_agents()
        return agent.readiness.readiness().ready

    await wait_for(ready, timeout=20, what="the node's IMEX daemon READY")


async def kill_daemon(agent: ImexAgent) -> int:
    """SIGKILL the node's daemon and wait until the agent knows it is down; its pid."""
    pid = agent.controller.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    await wait_for(
        lambda: agent.readiness.readiness().phase is Phase.WAITING,
        timeout=10,
        what="the agent waiting to restart its killed daemon",
    )
    return pid


async def prepare_one(plugin: DraPluginClient, claim: Claim) -> PrepareResult:
    return (await plugin.prepare([claim]))[claim.uid]


def requests(sim: SimNode, result: str) -> float:
    value = sim.metrics.registry.get_sample_value(
        "cdo_dra_requests_total", {"operation": "prepare", "result": result}
    )
    return value or 0.0


async def one_node(
    cluster: ImexCluster, *, ready_wait_s: float, restart_after_s: float
) -> tuple[SimNode, ImexAgent, DraPluginClient]:
    sim = cluster.node_list()[0]
    configure(sim, ready_wait_s=ready_wait_s, restart_after_s=restart_after_s)
    await cluster.register(sim)
    agent = await cluster.start(sim)
    plugin = await cluster.plugin(sim)
    await imex_ready(cluster, agent)
    return sim, agent, plugin


async def test_prepare_while_the_daemon_is_down_fails_clearly_then_succeeds_once_ready(
    cluster: ImexCluster,
) -> None:
    sim, agent, plugin = await one_node(cluster, ready_wait_s=0.3, restart_after_s=3.0)
    client = cluster.client
    clique = sim.topology.clique
    domain = await create_domain(client, namespace="ml", name="train", channel=21, clique=clique)
    claim = await create_claim(client, namespace="ml", name="c-0", domain=domain, node=sim.name)
    killed = await kill_daemon(agent)

    result = await prepare_one(plugin, claim)
    assert not result.ok
    reason = imex_refusal(agent.readiness.readiness(), clique=clique)
    assert reason is not None and reason.startswith("nvidia-imex is not running (phase Waiting")
    assert result.error.startswith(f"{NOT_READY} {sim.name} (waited 0.")
    assert reason in result.error
    assert "retriable" in result.error
    assert requests(sim, "imex_not_ready") == 1
    assert requests(sim, "ok") == 0
    assert claim.uid not in agent.driver.data.claims
    assert not (sim.device_root / "channel21").exists()
    assert not agent.driver.cdi_path(claim.uid).exists()

    # The kubelet retries; once the restarted daemon is READY the claim gets its channel.
    async def prepared() -> PrepareResult | None:
        cluster.check_agents()
        retried = await prepare_one(plugin, claim)
        if not retried.ok:
            assert retried.error.startswith(NOT_READY), retried.error
        return retried if retried.ok else None

    ok = await wait_for(prepared, timeout=20, interval=0.2, what="prepare after IMEX is READY")
    assert ok.cdi_device_ids == (f"cdo.dev/imex-channel={claim.uid}",)
    assert agent.controller.pid not in (None, killed)
    assert (sim.device_root / "channel21").exists()
    assert requests(sim, "ok") == 1

    # A claim already prepared answers from the checkpoint, IMEX or not.
    await kill_daemon(agent)
    again = await prepare_one(plugin, claim)
    assert again == ok


async def test_a_prepare_that_starts_while_the_daemon_is_down_waits_and_succeeds(
    cluster: ImexCluster,
) -> None:
    sim, agent, plugin = await one_node(cluster, ready_wait_s=20, restart_after_s=1.5)
    client = cluster.client
    clique = sim.topology.clique
    domain = await create_domain(client, namespace="ml", name="train", channel=22, clique=clique)
    claim = await create_claim(client, namespace="ml", name="c-0", domain=domain, node=sim.name)
    await kill_daemon(agent)

    result = await asyncio.wait_for(prepare_one(plugin, claim), timeout=20)
    assert result.ok, result.error
    # It answered only once the restarted daemon was READY (not during the 1.5 s backoff).
    assert agent.readiness.readiness().ready
    assert requests(sim, "imex_not_ready") == 0
    assert (sim.device_root / "channel22").exists()


# -- through the simulated kubelet ----------------------------------------------------------------

FAST_KUBELET = KubeletSettings(
    lease_duration_s=1,
    heartbeat_interval_s=0.2,
    status_update_interval_s=0.5,
    status_report_interval_s=5.0,
    retry_backoff_s=0.05,
    retry_backoff_max_s=0.5,
    plugin_scan_interval_s=0.05,
    plugin_call_timeout_s=5.0,
)


def kubelet_running(kubelet: SimulatedKubelet) -> contextlib.AbstractAsyncContextManager[None]:
    return running(kubelet.run(), name=f"kubelet {kubelet.node.name}")


async def run_pod(client: KubeClient, *, claim: Claim, domain: Domain, pod: str, node: str) -> None:
    """Create ``pod`` with ``claim``, seat it in the domain's Placement as the allocator does,
    reserve the claim for it and bind it, as the scheduler does."""
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod, "namespace": claim.namespace},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "registry.test/train:1",
                    "resources": {"claims": [{"name": "channel"}]},
                }
            ],
            "resourceClaims": [{"name": "channel", "resourceClaimName": claim.name}],
        },
    }
    created = msgspec.json.decode(
        await client.create(PODS, body, namespace=claim.namespace), type=Pod
    )
    await seat_pod(client, domain, pod=pod, node=node, uid=created.metadata.uid)
    reserved = [{"resource": "pods", "name": pod, "uid": created.metadata.uid}]
    await client.patch(
        RESOURCE_CLAIMS,
        claim.name,
        {"status": {"reservedFor": reserved}},
        namespace=claim.namespace,
        subresource="status",
    )
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod, "namespace": claim.namespace},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    path = PODS.path(namespace=claim.namespace, name=pod, subresource="binding")
    await client.request("POST", path, body=binding)


async def test_the_kubelet_shows_the_error_and_starts_the_pod_once_imex_is_ready(
    cluster: ImexCluster,
) -> None:
    sim = cluster.node_list()[0]
    client = cluster.client
    clique = sim.topology.clique
    configure(sim, ready_wait_s=0.3, restart_after_s=4.0)
    kubelet = SimulatedKubelet(
        sim.topology,
        client=client,
        plugins_dir=sim.kubelet_root / "plugins_registry",
        settings=FAST_KUBELET,
        labels={CLIQUE_LABEL: clique},  # the health monitor's label, set at registration
        informer_settings=InformerSettings(backoff_initial_s=0.05, backoff_max_s=0.5),
    )
    async with kubelet_running(kubelet):
        agent = await cluster.start(sim)
        await imex_ready(cluster, agent)
        domain = await create_domain(
            client, namespace="ml", name="train", channel=23, clique=clique
        )
        claim = await create_claim(
            client,
            namespace="ml",
            name="train-0-channel",
            domain=domain,
            node=sim.name,
            pod="train-0",
            reserve=False,
            seat=False,
        )
        await kill_daemon(agent)
        await run_pod(client, claim=claim, domain=domain, pod="train-0", node=sim.name)

        async def pod() -> Pod:
            cluster.check_agents()
            return msgspec.json.decode(await client.get(PODS, "train-0", namespace="ml"), type=Pod)

        async def shows_imex_error() -> bool:
            condition = (await pod()).condition("PodReadyToStartContainers")
            return (
                condition is not None
                and condition.reason == "FailedPrepareDynamicResources"
                and NOT_READY in condition.message
                and "nvidia-imex is not running" in condition.message
            )

        await wait_for(shows_imex_error, timeout=10, what="the pod showing the IMEX error")

        async def running() -> Pod | None:
            current = await pod()
            return current if current.status.phase == "Running" else None

        current = await wait_for(running, timeout=30, what="the pod running once IMEX is READY")
        devices = json.loads(current.metadata.annotations[CDI_DEVICES_ANNOTATION])
        assert devices == [f"cdo.dev/imex-channel={claim.uid}"]
        assert agent.readiness.readiness().ready
        assert (sim.device_root / "channel23").exists()
        assert requests(sim, "imex_not_ready") >= 1
