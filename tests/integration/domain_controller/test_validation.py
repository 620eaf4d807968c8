"""Bad specs are refused by the API server, with a message that names the field."""

from __future__ import annotations

from typing import Any

import pytest

from shared.crds import COMPUTE_DOMAINS, COMPUTE_DOMAINS_V1BETA1, PLACEMENTS
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError

from .cluster import NAMESPACE, Cluster, domain_manifest, resource_of


async def rejected(client: KubeClient, body: dict[str, Any]) -> str:
    with pytest.raises(KubeApiError) as caught:
        await client.create(resource_of(body), body, namespace=NAMESPACE)
    assert caught.value.code == 422, caught.value
    return caught.value.message


def with_channel(**channel: Any) -> dict[str, Any]:
    body = domain_manifest("d", "d-rct")
    body["spec"]["channel"] = channel
    return body


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        pytest.param(
            domain_manifest("d", "d-rct", num_nodes=-1),
            "spec.numNodes",
            "greater than or equal to 0",
            id="negative numNodes",
        ),
        pytest.param(
            with_channel(resourceClaimTemplate={"name": "d-rct"}, allocationMode="Some"),
            "spec.channel.allocationMode",
            '"All", "Single"',
            id="unknown allocation mode",
        ),
        pytest.param(
            domain_manifest("d", "Not_A_Name"),
            "spec.channel.resourceClaimTemplate.name",
            "should match",
            id="template name not a DNS subdomain",
        ),
        pytest.param(
            with_channel(allocationMode="Single"),
            "spec.channel.resourceClaimTemplate",
            "Required",
            id="no template",
        ),
        pytest.param(
            {**domain_manifest("d", "d-rct", num_nodes=2), "spec": {"numNodes": 2}},
            "spec.channel",
            "Required",
            id="no channel",
        ),
        pytest.param(
            domain_manifest("d", "d-rct", gang={"unitLabel": "team"}),
            "spec.gang.size",
            "spec.gang.size is required with spec.gang.unitLabel",
            id="a unit label without a unit size",
        ),
        pytest.param(
            domain_manifest("d", "d-rct", gang={"size": 8, "nodes": 9}),
            "spec.gang.nodes",
            "must not exceed spec.gang.size",
            id="more nodes than pods",
        ),
        pytest.param(
            domain_manifest("d", "d-rct", gang={"sliceSize": 0}),
            "spec.gang.sliceSize",
            "greater than or equal to 1",
            id="empty slices",
        ),
        pytest.param(
            domain_manifest("d" * 64, "d-rct"),
            "metadata.name",
            "no more than 63 characters",
            id="name too long for a label value",
        ),
    ],
)
async def test_invalid_specs_are_rejected_naming_the_field(
    cluster: Cluster, body: dict[str, Any], field: str, words: str
) -> None:
    message = await rejected(cluster.client, body)
    assert field in message and words in message, message


async def test_what_cdo_no_longer_bounds_is_accepted(cluster: Cluster) -> None:
    # numNodes is NVIDIA's field and bounds nothing here; a gang need not be whole slices.
    await cluster.create_domain("many", "many-rct", num_nodes=9, gang={"size": 8})
    await cluster.create_domain("ragged", "ragged-rct", gang={"size": 10, "sliceSize": 4})
    await cluster.create_domain("spread", "spread-rct", gang={"nodes": 4})
    for name in ("many", "ragged", "spread"):
        assert await cluster.domain(name) is not None


@pytest.mark.parametrize(
    "resource", [COMPUTE_DOMAINS, COMPUTE_DOMAINS_V1BETA1], ids=["v1beta2", "v1beta1"]
)
async def test_template_name_and_allocation_mode_are_immutable(
    cluster: Cluster, resource: Any
) -> None:
    await cluster.create_domain("d", "d-rct", num_nodes=2)
    for patch, field in [
        ({"channel": {"resourceClaimTemplate": {"name": "other"}}}, "resourceClaimTemplate.name"),
        ({"channel": {"allocationMode": "All"}}, "allocationMode"),
    ]:
        with pytest.raises(KubeApiError) as caught:
            await cluster.client.patch(resource, "d", {"spec": patch}, namespace=NAMESPACE)
        assert caught.value.code == 422
        assert f"spec.channel.{field} is immutable" in caught.value.message
    # numNodes is not part of the channel and may change (cdo does not use it).
    await cluster.client.patch(
        COMPUTE_DOMAINS_V1BETA1, "d", {"spec": {"numNodes": 3}}, namespace=NAMESPACE
    )


async def test_placement_channel_must_exist(cluster: Cluster) -> None:
    body = {
        "apiVersion": PLACEMENTS.api_version,
        "kind": "Placement",
        "metadata": {"name": "d", "namespace": NAMESPACE},
        "spec": {"clique": "c.1", "channel": 2048, "gpusPerPod": 4, "size": 1},
    }
    with pytest.raises(KubeApiError) as caught:
        await cluster.client.create(PLACEMENTS, body, namespace=NAMESPACE)
    assert caught.value.code == 422 and "spec.channel" in caught.value.message
