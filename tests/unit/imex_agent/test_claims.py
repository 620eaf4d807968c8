"""From a claim to its channel: the decision, and every way it refuses."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from services.imex_agent.checkpoint import DeviceRecord
from services.imex_agent.claims import ClaimRefusedError, PlacementView, decide
from shared.kube.models import ResourceClaim
from shared.kubeletapi import Claim

DRIVER = "compute-domain.cdo.dev"
CLIQUE = "6f0b6a9c-1b8e-4a52-9e2b-2a1e5b7a0c11.1"
CLAIM = Claim(namespace="team-a", uid="c-1", name="train-0-channel")


def claim_object(
    *,
    uid: str = "c-1",
    labels: dict[str, str] | None = None,
    results: list[dict[str, str]] | None = None,
) -> ResourceClaim:
    body: dict[str, Any] = {
        "metadata": {
            "name": "train-0-channel",
            "namespace": "team-a",
            "uid": uid,
            "labels": {"cdo.dev/compute-domain": "train", "cdo.dev/compute-domain-uid": "d-1"}
            if labels is None
            else labels,
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "channel", "driver": DRIVER, "pool": "n1", "device": "attach-2"}
                    ]
                    if results is None
                    else results
                }
            }
        },
    }
    return msgspec.convert(body, ResourceClaim)


def placement(
    *, namespace: str = "team-a", owner: str = "d-1", clique: str = CLIQUE, channel: int = 7
) -> PlacementView:
    body: dict[str, Any] = {
        "metadata": {
            "name": "train",
            "namespace": namespace,
            "ownerReferences": [
                {
                    "apiVersion": "resource.nvidia.com/v1beta1",
                    "kind": "ComputeDomain",
                    "name": "train",
                    "uid": owner,
                }
            ],
        },
        "spec": {"clique": clique, "channel": channel},
    }
    return msgspec.convert(body, PlacementView)


def run(**overrides: Any) -> Any:
    arguments: dict[str, Any] = {
        "claim": CLAIM,
        "obj": claim_object(),
        "placement": placement(),
        "elsewhere": None,
        "node": "n1",
        "clique": CLIQUE,
        "driver": DRIVER,
    }
    arguments.update(overrides)
    return decide(**arguments)


def test_claim_gets_its_domains_channel() -> None:
    resolution = run()
    assert resolution.grant.channel == 7
    assert (resolution.grant.domain_namespace, resolution.grant.domain_name) == ("team-a", "train")
    assert resolution.grant.domain_uid == "d-1"
    assert resolution.devices == (DeviceRecord(request="channel", pool="n1", device="attach-2"),)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"obj": None}, "does not exist"),
        ({"obj": claim_object(uid="c-2")}, "deleted and recreated"),
        (
            {
                "obj": claim_object(
                    results=[{"request": "r", "driver": DRIVER, "pool": "n2", "device": "a"}]
                )
            },
            "no compute-domain.cdo.dev device allocated on node n1",
        ),
        (
            {
                "obj": claim_object(
                    results=[
                        {"request": "r", "driver": "gpu.nvidia.com", "pool": "n1", "device": "a"}
                    ]
                )
            },
            "no compute-domain.cdo.dev device",
        ),
        ({"obj": claim_object(labels={})}, "not made from a ComputeDomain's claim template"),
        (
            {"placement": None, "elsewhere": placement(namespace="team-b")},
            "in another namespace",
        ),
        ({"placement": None}, "has no Placement yet"),
        ({"placement": placement(owner="d-0")}, "belongs to ComputeDomain uid d-0"),
        ({"clique": None}, "has no NVLink clique"),
        ({"placement": placement(clique="other.1")}, "is placed in clique 'other.1'"),
    ],
)
def test_refusals(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ClaimRefusedError, match=message):
        run(**overrides)


def test_a_claim_in_another_namespace_never_gets_that_domains_channel() -> None:
    """Even when its own namespace has a domain of the same name."""
    with pytest.raises(ClaimRefusedError, match="another namespace"):
        run(placement=placement(owner="someone-else"), elsewhere=placement(namespace="team-b"))


def test_the_resolution_carries_the_placements_trace_annotations() -> None:
    view = placement()
    annotated = msgspec.structs.replace(
        view,
        metadata=msgspec.structs.replace(
            view.metadata,
            annotations={
                "cdo.dev/trace-context": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                "kubectl.kubernetes.io/last-applied-configuration": "{}",
            },
        ),
    )
    assert run(placement=annotated).story == {
        "cdo.dev/trace-context": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    }
    assert run().story == {}
