"""Claims from templates against the emulator: made once, recorded, released, collected."""

from __future__ import annotations

import re
from typing import Any

import pytest

from shared.kube.client import KubeClient
from shared.kube.models import Pod, ResourceClaim
from shared.kube.resources import RESOURCE_CLAIMS
from sim.controllers import ControllerManager
from sim.controllers.resourceclaim import DELETE_PROTECTION_FINALIZER, POD_CLAIM_NAME_ANNOTATION
from sim.kubeapi import KubeServer
from tests.integration.controllers.cluster import NAMESPACE, Cluster, pod_template
from tests.integration.controllers.conftest import FAST
from tests.support.wait import wait_for

LABELS = {"cdo.dev/compute-domain": "dom", "cdo.dev/compute-domain-uid": "1234"}
CLAIMS = [{"name": "imex", "resourceClaimTemplateName": "channel"}]


async def claim_of(cluster: Cluster, pod_name: str) -> tuple[Pod, ResourceClaim] | None:
    pod = await cluster.pod(pod_name)
    if pod is None or not pod.status.resource_claim_statuses:
        return None
    [status] = pod.status.resource_claim_statuses
    assert status.resource_claim_name is not None
    claim = await cluster.claim(status.resource_claim_name)
    return None if claim is None else (pod, claim)


async def reserve(client: KubeClient, claim: ResourceClaim, pod: Pod) -> None:
    """The scheduler's part: allocate the claim and reserve it for the pod."""
    status: dict[str, Any] = {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "channel", "driver": "d.example", "pool": "n1", "device": "a0"}
                ]
            }
        },
        "reservedFor": [{"resource": "pods", "name": pod.metadata.name, "uid": pod.metadata.uid}],
    }
    await client.patch(
        RESOURCE_CLAIMS,
        claim.metadata.name,
        {"metadata": {"finalizers": [DELETE_PROTECTION_FINALIZER]}},
        namespace=NAMESPACE,
    )
    await client.patch(
        RESOURCE_CLAIMS,
        claim.metadata.name,
        {"status": status},
        namespace=NAMESPACE,
        subresource="status",
    )


@pytest.mark.usefixtures("controllers")
async def test_a_pod_gets_a_claim_from_the_template(cluster: Cluster) -> None:
    await cluster.create_claim_template("channel", labels=LABELS, annotations={"team": "ml"})
    await cluster.create_pod("trainer", pod_template(claims=CLAIMS))
    pod, claim = await wait_for(lambda: claim_of(cluster, "trainer"), what="a recorded claim")
    meta = claim.metadata
    assert re.fullmatch(r"trainer-imex-[a-z0-9]{5}", meta.name)
    assert meta.labels == LABELS
    assert meta.annotations == {"team": "ml", POD_CLAIM_NAME_ANNOTATION: "imex"}
    [owner] = meta.owner_references
    assert (owner.kind, owner.name, owner.uid) == ("Pod", "trainer", pod.metadata.uid)
    assert owner.controller is True and owner.block_owner_deletion is True
    requests = claim.spec["devices"]["requests"]
    assert requests[0]["exactly"]["deviceClassName"] == "compute-domain-channel.cdo.dev"
    [status] = pod.status.resource_claim_statuses
    assert (status.name, status.resource_claim_name) == ("imex", meta.name)

    await cluster.delete_pod(pod)

    async def collected() -> bool:
        return await cluster.claim(meta.name) is None

    await wait_for(collected, what="the claim to go with its pod")


@pytest.mark.usefixtures("controllers")
async def test_a_pod_waits_for_its_template(cluster: Cluster) -> None:
    await cluster.create_pod("trainer", pod_template(claims=CLAIMS))
    await cluster.create_claim_template("channel", labels=LABELS)
    _, claim = await wait_for(lambda: claim_of(cluster, "trainer"), what="a late claim")
    assert claim.metadata.labels == LABELS


async def test_claims_are_made_once(
    cluster: Cluster, kube_client: KubeClient, emulator: KubeServer
) -> None:
    await cluster.create_claim_template("channel", labels=LABELS)
    # The first status write fails: the retry must find the claim it already made.
    emulator.faults.fail_next(2, code=500, verbs=["patch"], resource="pods")
    await cluster.create_pod("trainer", pod_template(claims=CLAIMS))
    async with ControllerManager(kube_client, settings=FAST).running():
        await wait_for(lambda: claim_of(cluster, "trainer"), what="a recorded claim")
    # A controller that starts afresh finds the recorded claim too.
    async with ControllerManager(kube_client, settings=FAST).running() as again:
        await wait_for(lambda: again.idle, what="an idle controller")
    assert len(await cluster.claims()) == 1


@pytest.mark.usefixtures("controllers")
async def test_a_finished_pod_releases_and_deletes_its_claim(
    cluster: Cluster, kube_client: KubeClient
) -> None:
    await cluster.create_claim_template("channel", labels=LABELS)
    await cluster.create_pod("trainer", pod_template(claims=CLAIMS, restart="Never"))
    pod, claim = await wait_for(lambda: claim_of(cluster, "trainer"), what="a recorded claim")
    await reserve(kube_client, claim, pod)
    await cluster.bind(pod, "node-1")
    await cluster.set_phase(pod, "Running", ready=True)

    async def still_reserved() -> bool:
        found = await cluster.claim(claim.metadata.name)
        return found is not None and len(found.status.reserved_for) == 1

    assert await still_reserved()
    await cluster.set_phase(pod, "Succeeded")

    async def released() -> bool:
        return await cluster.claim(claim.metadata.name) is None

    await wait_for(released, what="the finished pod's claim to go")
    assert await cluster.pod("trainer") is not None


@pytest.mark.usefixtures("controllers")
async def test_reservations_of_deleted_pods_are_removed(
    cluster: Cluster, kube_client: KubeClient
) -> None:
    """A claim shared by name (not from a template) outlives its consumers; it is freed."""
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "shared"},
        "spec": {"devices": {"requests": []}},
    }
    await kube_client.create(RESOURCE_CLAIMS, body, namespace=NAMESPACE)
    user = await cluster.create_pod(
        "user", pod_template(claims=[{"name": "s", "resourceClaimName": "shared"}])
    )
    shared = await cluster.claim("shared")
    assert shared is not None
    await reserve(kube_client, shared, user)
    await cluster.delete_pod(user)

    async def freed() -> ResourceClaim | None:
        found = await cluster.claim("shared")
        if found is None or found.status.reserved_for or found.status.allocation is not None:
            return None
        return None if found.metadata.finalizers else found

    await wait_for(freed, what="the reservation, allocation and finalizer to go")
