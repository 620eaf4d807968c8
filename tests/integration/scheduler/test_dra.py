"""DRA through the emulator: claims allocated from the node's ResourceSlice before binding."""

from __future__ import annotations

from typing import Any

from shared.kube.client import KubeClient
from shared.kube.resources import PODS, RESOURCE_CLAIMS
from sim.scheduler import Scheduler
from tests.integration.scheduler.cluster import (
    NAMESPACE,
    claim,
    create_claim,
    create_class,
    create_node,
    create_pod,
    create_slice,
    device_class,
    get_claim,
    get_pod,
    node,
    pod,
    resource_slice,
    wait_bound,
    wait_unschedulable,
)
from tests.support.wait import wait_for

DRIVER = "compute-domain.cdo.dev"
OTHER_DRIVER = "gpu.example.com"
CHANNEL_CLASS = "compute-domain-channel.cdo.dev"


async def two_nodes_one_attachment(client: KubeClient) -> None:
    """n1 publishes one attachment device of our driver; n2 only a device of another driver."""
    await create_node(client, node("n1"))
    await create_node(client, node("n2"))
    await create_class(client, device_class(CHANNEL_CLASS, f'device.driver == "{DRIVER}"'))
    await create_slice(
        client,
        resource_slice(
            "n1-attachments",
            node_name="n1",
            driver=DRIVER,
            devices=[{"name": "slot-0", "attributes": {"type": {"string": "attachment"}}}],
        ),
    )
    await create_slice(
        client,
        resource_slice("n2-gpus", node_name="n2", driver=OTHER_DRIVER, devices=[{"name": "gpu-0"}]),
    )


def with_claim(name: str, claim_name: str) -> dict[str, Any]:
    return pod(name, claims=[{"name": "channel", "resourceClaimName": claim_name}])


async def test_a_claim_gets_the_device_of_its_nodes_slice_and_a_second_pod_waits(
    kube_client: KubeClient, scheduler: Scheduler
) -> None:
    await two_nodes_one_attachment(kube_client)
    await create_claim(
        kube_client,
        claim(
            "first-channel",
            device_class_name=CHANNEL_CLASS,
            selectors=[f'device.attributes["{DRIVER}"].type == "attachment"'],
        ),
    )
    await create_pod(kube_client, with_claim("first", "first-channel"))
    assert await wait_bound(kube_client, "first") == "n1"

    written = await get_claim(kube_client, "first-channel")
    allocation = written.status.allocation
    assert allocation is not None
    assert [(r.request, r.driver, r.pool, r.device) for r in allocation.devices.results] == [
        ("slot", DRIVER, "n1", "slot-0")
    ]
    assert allocation.node_selector is not None
    assert allocation.node_selector.node_selector_terms[0].match_fields[0].values == ("n1",)
    first = await get_pod(kube_client, "first")
    assert [(r.resource, r.name, r.uid) for r in written.status.reserved_for] == [
        ("pods", "first", first.metadata.uid)
    ]

    await create_claim(kube_client, claim("second-channel", device_class_name=CHANNEL_CLASS))
    await create_pod(kube_client, with_claim("second", "second-channel"))
    message = await wait_unschedulable(kube_client, "second")
    assert message == "0/2 nodes are available: 2 cannot allocate all claims."

    # the resource-claim controller's part, played here: the pod and its claim go away
    await kube_client.delete(PODS, "first", namespace=NAMESPACE)
    await kube_client.delete(RESOURCE_CLAIMS, "first-channel", namespace=NAMESPACE)
    assert await wait_bound(kube_client, "second") == "n1"
    second_claim = await get_claim(kube_client, "second-channel")
    assert second_claim.status.allocation is not None
    assert second_claim.status.allocation.devices.results[0].device == "slot-0"


async def test_a_pod_waits_for_its_template_claim_to_be_created(
    kube_client: KubeClient, scheduler: Scheduler
) -> None:
    await two_nodes_one_attachment(kube_client)
    await create_pod(
        kube_client,
        pod("worker", claims=[{"name": "channel", "resourceClaimTemplateName": "domain-channel"}]),
    )
    # Like kube-scheduler's DRA PreEnqueue: looked at and set aside, but not tried, so no
    # PodScheduled=False is written and no backoff delays it once the claim is there.
    await wait_for(lambda: scheduler.unschedulable_pods == 1, what="the pod set aside")
    owner = await get_pod(kube_client, "worker")
    assert owner.condition("PodScheduled") is None
    assert not owner.spec.node_name
    made = claim("worker-channel-x7", device_class_name=CHANNEL_CLASS)
    made["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "worker",
            "uid": owner.metadata.uid,
            "controller": True,
        }
    ]
    await create_claim(kube_client, made)
    await kube_client.patch(
        PODS,
        "worker",
        {
            "status": {
                "resourceClaimStatuses": [
                    {"name": "channel", "resourceClaimName": "worker-channel-x7"}
                ]
            }
        },
        namespace=NAMESPACE,
        subresource="status",
    )
    assert await wait_bound(kube_client, "worker") == "n1"

    async def allocated() -> bool:
        return (await get_claim(kube_client, "worker-channel-x7")).status.allocation is not None

    await wait_for(allocated, what="the template claim allocated")
    assert scheduler.stats.unschedulable_attempts == 0


async def test_a_shared_claim_already_allocated_is_reused_on_its_node(
    kube_client: KubeClient, scheduler: Scheduler
) -> None:
    await two_nodes_one_attachment(kube_client)
    await create_claim(kube_client, claim("shared", device_class_name=CHANNEL_CLASS))
    await create_pod(kube_client, with_claim("a", "shared"))
    assert await wait_bound(kube_client, "a") == "n1"
    await create_pod(kube_client, with_claim("b", "shared"))
    assert await wait_bound(kube_client, "b") == "n1"

    async def both_reserved() -> list[str]:
        names = [r.name for r in (await get_claim(kube_client, "shared")).status.reserved_for]
        return names if len(names) == 2 else []

    assert sorted(await wait_for(both_reserved, what="both pods reserved")) == ["a", "b"]
