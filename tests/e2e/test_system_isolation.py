"""Channel isolation on the whole system: a hand-made claim that copies a domain's labels, used
by a pod on a member node, never gets the domain's channel; its pod shows the refusal in its
events and stays Pending, while the domain's members run."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from shared.kube.models import Pod, ResourceClaim
from shared.kube.resources import PODS, RESOURCE_CLAIMS
from tests.e2e.whole_system import SYSTEM_STEP_S, WholeSystem, running_whole_system
from tests.support.kubeevents import CoreEvent, events_involving
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

    async def refused() -> CoreEvent | None:
        events = await events_involving(system.client, "intruder", namespace=NAMESPACE)
        return next(
            (
                event
                for event in events
                if event.reason == "FailedPrepareDynamicResources"
                and "is not a member of ComputeDomain isolation/train" in event.message
            ),
            None,
        )

    event = await wait_for(refused, timeout=SYSTEM_STEP_S, interval=0.3, what="the refusal")
    assert event.type == "Warning"
    assert "ResourceClaim isolation/forged gets no channel" in event.message

    (intruder,) = await system.pods(NAMESPACE, "app=intruder")
    forged = next(c for c in await system.claims(NAMESPACE) if c.metadata.name == "forged")
    # It reached the agent: scheduled on the member node, its claim allocated there.
    assert intruder.spec.node_name == node
    assert forged.status.allocation is not None
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
