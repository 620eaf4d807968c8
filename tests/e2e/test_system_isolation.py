"""Channels on the whole system: who gets one, and NVIDIA's own checks of who does.

- Isolation: a hand-made claim that copies a domain's labels, used by a pod on a member node,
  never gets the domain's channel: the clique allocator's channel-allocation webhook refuses the
  scheduler's allocation of it, the pod's PodScheduled condition says why and it stays Pending,
  while the domain's members run.
- NVIDIA's IMEX channel checks, run unchanged (the shapes of NVIDIA's demo specs and what its
  bats tests check, docs/migrating.md): a domain and one bare pod whose only claim is the
  domain's channel runs, with the channel in its CDI edits; the global status is Ready while it
  runs and NotReady with no nodes once it is gone (``numNodes: 1``); ``numNodes: 0`` is Ready as
  soon as the pod's node is; such a pod beside a domain's GPU pods shares their clique and
  channel."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from bench._e2e_workloads import gpu_job
from shared.crds import COMPUTE_DOMAINS, ComputeDomain
from shared.crds.names import PLACED_CONDITION
from shared.kube.models import Pod, ResourceClaim
from shared.kube.resources import JOBS, PODS, RESOURCE_CLAIMS
from tests.e2e.whole_system import (
    SYSTEM_STEP_S,
    WholeSystem,
    domain_object,
    gated,
    live,
    running_whole_system,
)
from tests.support.wait import wait_for

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.slow,
    pytest.mark.timeout(600),
]

NAMESPACE = "isolation"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def system() -> AsyncIterator[WholeSystem]:
    async with running_whole_system() as running:
        yield running


def claim_of(pod: Pod, claims: list[ResourceClaim]) -> ResourceClaim:
    (status,) = pod.status.resource_claim_statuses
    return next(c for c in claims if c.metadata.name == status.resource_claim_name)


def forged_claim(real: ResourceClaim) -> dict[str, Any]:
    """A claim with the real one's labels and device request, made by hand."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "forged", "labels": dict(real.metadata.labels)},
        "spec": real.spec,
    }


def intruder_pod(node: str) -> dict[str, Any]:
    """A pod on a member node that uses the forged claim (no template: the webhook lets it
    through ungated, and the scheduler allocates the claim an attachment device there)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "intruder", "labels": {"app": "intruder"}},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "containers": [
                {
                    "name": "worker",
                    "image": "registry.example.com/worker:1.0",
                    "resources": {"claims": [{"name": "imex-channel"}]},
                }
            ],
            "resourceClaims": [{"name": "imex-channel", "resourceClaimName": "forged"}],
        },
    }


async def test_a_forged_claim_copying_a_domains_labels_never_gets_its_channel(
    system: WholeSystem,
) -> None:
    await system.create_namespace(NAMESPACE)
    await system.create_workload(NAMESPACE, "train", replicas=2, gpus=1)
    members = await system.wait_running(NAMESPACE, "app=train", 2)
    await system.wait_domain_ready(NAMESPACE, "train")
    placement = await system.placement(NAMESPACE, "train")
    assert placement is not None
    channel = placement.spec.slices[0].channel
    node = members[0].spec.node_name
    real = claim_of(members[0], await system.claims(NAMESPACE))

    await system.client.create(RESOURCE_CLAIMS, forged_claim(real), namespace=NAMESPACE)
    await system.client.create(PODS, intruder_pod(node), namespace=NAMESPACE)

    async def refused() -> Pod | None:
        # The scheduler's allocation of the forged claim is refused by the clique allocator's
        # channel-allocation webhook: the pod's PodScheduled condition says so, and it stays
        # unbound (kube-scheduler's SchedulerError after a PreBind plugin's failed write).
        (pod,) = await system.pods(NAMESPACE, "app=intruder")
        condition = pod.condition("PodScheduled")
        if condition is None or condition.reason != "SchedulerError":
            return None
        return pod if "was not made from a ResourceClaimTemplate" in condition.message else None

    intruder = await wait_for(refused, timeout=SYSTEM_STEP_S, interval=0.3, what="the refusal")
    scheduled = intruder.condition("PodScheduled")
    assert scheduled is not None and "ResourceClaim isolation/forged" in scheduled.message

    forged = next(c for c in await system.claims(NAMESPACE) if c.metadata.name == "forged")
    # Refused before it reached the node: never bound, its claim never allocated a device.
    assert not intruder.spec.node_name
    assert forged.status.allocation is None
    assert intruder.status.phase == "Pending"
    assert forged.metadata.uid not in system.channel_specs(node)
    assert real.metadata.uid in system.channel_specs(node)
    assert system.channel_devices(node) == {channel}
    assert await system.running(NAMESPACE, "app=train", 2) is not None

    await system.client.delete(PODS, "intruder", namespace=NAMESPACE)
    await system.client.delete(RESOURCE_CLAIMS, "forged", namespace=NAMESPACE)
    await system.clean_up(NAMESPACE)
    assert await system.leftovers() == []


async def test_a_pod_naming_a_members_claim_is_not_scheduled_onto_it(
    system: WholeSystem,
) -> None:
    # The kubelet would hand a second pod of an already prepared claim its CDI devices without
    # asking the agent; the channel-claims policy keeps the scheduler from adding that pod.
    namespace = f"{NAMESPACE}-shared"
    await system.create_namespace(namespace)
    await system.create_workload(namespace, "train", replicas=2, gpus=1)
    members = await system.wait_running(namespace, "app=train", 2)
    await system.wait_domain_ready(namespace, "train")
    node = members[0].spec.node_name
    real = claim_of(members[0], await system.claims(namespace))
    pod = intruder_pod(node)
    pod["spec"]["resourceClaims"][0]["resourceClaimName"] = real.metadata.name
    await system.client.create(PODS, pod, namespace=namespace)

    async def refused() -> str | None:
        (intruder,) = await system.pods(namespace, "app=intruder")
        condition = intruder.condition("PodScheduled")
        if condition is None or condition.reason != "SchedulerError":
            return None
        return condition.message

    message = await wait_for(refused, timeout=SYSTEM_STEP_S, interval=0.3, what="the refusal")
    assert "ValidatingAdmissionPolicy 'cdo-channel-claim-one-pod'" in message
    assert f"ResourceClaim {real.metadata.name} holds an IMEX channel of cdo" in message
    (intruder,) = await system.pods(namespace, "app=intruder")
    assert intruder.spec.node_name == ""
    claim = next(c for c in await system.claims(namespace) if c.metadata.name == real.metadata.name)
    assert [ref.name for ref in claim.status.reserved_for] == [members[0].metadata.name]
    assert await system.running(namespace, "app=train", 2) is not None

    await system.client.delete(PODS, "intruder", namespace=namespace)
    await system.clean_up(namespace)
    assert await system.leftovers() == []


# -- NVIDIA's IMEX channel checks ------------------------------------------------------------------


def channel_check_pod(name: str, template: str, *, host_managed: bool = False) -> dict[str, Any]:
    """A bare pod whose only claim is the domain's channel (no GPU, no owner), listing the
    channel devices and sleeping, as NVIDIA's channel-injection demo; ``host_managed``: with
    the host-managed smoke spec's node affinity on the clique label and its toleration."""
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "ctr",
                "image": "ubuntu:22.04",
                "command": ["bash", "-c"],
                "args": ["ls -la /dev/nvidia-caps-imex-channels; sleep 9999"],
                "resources": {"claims": [{"name": "imex-channel-0"}]},
            }
        ],
        "resourceClaims": [{"name": "imex-channel-0", "resourceClaimTemplateName": template}],
    }
    if host_managed:
        spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "nvidia.com/gpu.clique", "operator": "Exists"}
                            ]
                        }
                    ]
                }
            }
        }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def cdi_edits(system: WholeSystem, pod: Pod, claims: list[ResourceClaim]) -> dict[str, Any]:
    """The container edits of the CDI spec the pod's node agent wrote for its channel claim."""
    uid = claim_of(pod, claims).metadata.uid
    path = system.state_dir / "nodehost" / pod.spec.node_name / "cdi"
    spec = json.loads((path / f"cdo.dev-imex-channel_{uid}.json").read_text())
    (device,) = spec["devices"]
    edits: dict[str, Any] = device["containerEdits"]
    return edits


async def domain_status(system: WholeSystem, namespace: str, name: str) -> ComputeDomain:
    found = await system.domain(namespace, name)
    assert found is not None
    return found


async def test_nvidias_channel_injection_check_runs_and_reports_as_its_tests_expect(
    system: WholeSystem,
) -> None:
    namespace = "imex-check"
    await system.create_namespace(namespace)
    domain = domain_object("imex-channel-injection", num_nodes=1)
    domain["spec"]["channel"]["resourceClaimTemplate"]["name"] = "imex-channel-0"
    await system.client.create(COMPUTE_DOMAINS, domain, namespace=namespace)
    await system.client.create(
        PODS, channel_check_pod("imex-channel-injection", "imex-channel-0"), namespace=namespace
    )

    async def running() -> Pod | None:
        found = live(await system.pods(namespace))
        return found[0] if len(found) == 1 and found[0].status.phase == "Running" else None

    pod = await wait_for(running, timeout=SYSTEM_STEP_S, interval=0.2, what="the check running")
    edits = cdi_edits(system, pod, await system.claims(namespace))
    assert [node["path"] for node in edits["deviceNodes"]] == [
        "/dev/nvidia-caps-imex-channels/channel0"
    ]
    env = dict(item.split("=", 1) for item in edits["env"])
    assert env["COMPUTE_DOMAIN_NAME"] == "imex-channel-injection"
    assert env["COMPUTE_DOMAIN_NAMESPACE"] == namespace
    assert "CDO_RANK" not in env  # it takes no GPU and holds no rank
    ready = await system.wait_domain_ready(namespace, "imex-channel-injection", nodes=1)
    (entry,) = ready.status.nodes
    assert (entry.name, entry.status) == (pod.spec.node_name, "Ready")
    assert entry.clique_id == env["CLIQUE_ID"]

    await system.client.delete(PODS, "imex-channel-injection", namespace=namespace)

    async def released() -> ComputeDomain | None:
        found = await domain_status(system, namespace, "imex-channel-injection")
        return found if found.status.status == "NotReady" and not found.status.nodes else None

    await wait_for(released, timeout=SYSTEM_STEP_S, interval=0.2, what="NotReady, no nodes")
    await system.clean_up(namespace)
    assert await system.leftovers() == []


async def test_the_host_managed_smoke_spec_with_num_nodes_0_is_ready_once_its_pod_runs(
    system: WholeSystem,
) -> None:
    namespace = "imex-smoke"
    await system.create_namespace(namespace)
    domain = domain_object("hostmanaged-smoke", num_nodes=0)
    domain["spec"]["channel"] = {
        "resourceClaimTemplate": {"name": "hostmanaged-smoke-channel"},
        "allocationMode": "Single",
    }
    await system.client.create(COMPUTE_DOMAINS, domain, namespace=namespace)
    pod = channel_check_pod("hostmanaged-smoke", "hostmanaged-smoke-channel", host_managed=True)
    await system.client.create(PODS, pod, namespace=namespace)
    ready = await system.wait_domain_ready(namespace, "hostmanaged-smoke", nodes=1)
    (running,) = live(await system.pods(namespace))
    assert running.status.phase == "Running"
    assert [n.name for n in ready.status.nodes] == [running.spec.node_name]
    await system.client.delete(PODS, "hostmanaged-smoke", namespace=namespace)
    await system.clean_up(namespace)
    assert await system.leftovers() == []


async def test_a_pod_without_gpus_beside_a_domains_gpu_pods_shares_their_clique_and_channel(
    system: WholeSystem,
) -> None:
    namespace = "imex-mixed"
    await system.create_namespace(namespace)
    await system.client.create(COMPUTE_DOMAINS, domain_object("train"), namespace=namespace)
    job = gpu_job("train", namespace, domain="train", pods=3, gpus_per_pod=1)
    await system.client.create(JOBS, job, namespace=namespace)
    await system.client.create(
        PODS, channel_check_pod("coordinator", "train-rct"), namespace=namespace
    )
    await system.wait_running(namespace, "app=train", 3)
    ready = await system.wait_domain_ready(namespace, "train")
    pods = live(await system.pods(namespace))
    assert len(pods) == 4 and all(p.status.phase == "Running" for p in pods)
    claims = await system.claims(namespace)
    channels = {
        p.metadata.name: tuple(n["path"] for n in cdi_edits(system, p, claims)["deviceNodes"])
        for p in pods
    }
    assert len(set(channels.values())) == 1, channels  # one channel for all four
    placement = await system.placement(namespace, "train")
    assert placement is not None
    (piece,) = placement.spec.slices  # one clique
    assert (placement.spec.size, placement.spec.channel_only) == (3, 1)
    seated = [ref.name for m in piece.members for ref in m.channel_only_pods]
    assert seated == ["coordinator"]
    cliques = await system.cliques()
    assert {cliques[p.spec.node_name] for p in pods} == {piece.clique}
    assert ready.status.clique == piece.clique and ready.status.channel == piece.channel
    coordinator = next(p for p in pods if p.metadata.name == "coordinator")
    assert coordinator.spec.node_name in {n.name for n in ready.status.nodes}
    await system.client.delete(PODS, "coordinator", namespace=namespace)
    await system.clean_up(namespace)
    assert await system.leftovers() == []


async def test_a_pod_without_gpus_that_no_clique_node_may_take_waits_and_says_why(
    system: WholeSystem,
) -> None:
    namespace = "imex-nowhere"
    await system.create_namespace(namespace)
    await system.client.create(COMPUTE_DOMAINS, domain_object("nowhere"), namespace=namespace)
    pod = channel_check_pod("nowhere", "nowhere-rct")
    outside = {"key": "nvidia.com/gpu.clique", "operator": "DoesNotExist"}
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [outside]}]
            }
        }
    }
    await system.client.create(PODS, pod, namespace=namespace)

    async def held() -> str | None:
        (found,) = live(await system.pods(namespace))
        condition = found.condition(PLACED_CONDITION)
        if condition is None or condition.reason != "NoChannelAvailable" or not gated(found):
            return None
        return condition.message

    message = await wait_for(held, timeout=SYSTEM_STEP_S, what="the pod held NoChannelAvailable")
    assert message.startswith(
        "no clique can give this pod, which asks for no GPU, the domain's IMEX channel"
    )
    assert "ruled out by the pod's constraints" in message
    assert await system.placement(namespace, "nowhere") is None
    explained = await system.cdo("explain", "pod/nowhere", "-n", namespace)
    assert "NoChannelAvailable" in explained
    assert "no node can give it the domain's IMEX channel" in explained
    await system.client.delete(PODS, "nowhere", namespace=namespace)
    await system.clean_up(namespace)
    assert await system.leftovers() == []
