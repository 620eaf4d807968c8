"""Channel attachment devices: what nodes publish, who holds them, and what a change routes."""

from __future__ import annotations

from typing import Any

import msgspec

from services.clique_allocator.attachments import (
    attachment_nodes,
    claim_holders,
    published_attachments,
)
from services.clique_allocator.routing import (
    attachment_slice_changed,
    claim_changed,
)
from shared.crds.names import DRIVER_NAME
from shared.kube.models import ResourceClaim, ResourceSlice


def attachment_slice(node: str, devices: int, *, generation: int = 0) -> ResourceSlice:
    """A node's cdo slice, as the IMEX agent publishes it (``attach-0`` ..)."""
    body: dict[str, Any] = {
        "metadata": {"name": f"{node}-{DRIVER_NAME}"},
        "spec": {
            "driver": DRIVER_NAME,
            "nodeName": node,
            "pool": {"name": node, "generation": generation},
            "devices": [{"name": f"attach-{i}"} for i in range(devices)],
        },
    }
    return msgspec.convert(body, type=ResourceSlice)


def channel_claim(name: str, node: str | None, *, pod: str = "") -> ResourceClaim:
    owners = [{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": "u", "controller": True}]
    status: dict[str, Any] = {}
    if node is not None:
        status["allocation"] = {
            "devices": {
                "results": [
                    {"request": "channel", "driver": DRIVER_NAME, "pool": node, "device": "a-0"},
                    {"request": "gpus", "driver": "gpu.nvidia.com", "pool": node, "device": "g"},
                ]
            }
        }
    body = {
        "metadata": {"name": name, "namespace": "ml", "ownerReferences": owners if pod else []},
        "status": status,
    }
    return msgspec.convert(body, type=ResourceClaim)


def test_a_node_publishes_the_devices_of_its_newest_slice_of_cdos_driver() -> None:
    other = msgspec.structs.replace(
        attachment_slice("n2", 4),
        spec=msgspec.structs.replace(attachment_slice("n2", 4).spec, driver="gpu.nvidia.com"),
    )
    slices = [
        attachment_slice("n1", 8, generation=1),
        attachment_slice("n1", 4, generation=2),
        attachment_slice("n3", 0),
        other,
    ]
    assert published_attachments(slices) == {"n1": 4, "n3": 0}


def test_a_pods_claim_holds_for_its_pod_and_a_hand_made_claim_for_itself() -> None:
    claims = [
        channel_claim("train-0-channel", "n1", pod="train-0"),
        channel_claim("forged", "n1"),
        channel_claim("pending", None, pod="train-1"),
    ]
    assert attachment_nodes(claims[0]) == ["n1"]
    assert attachment_nodes(claims[2]) == []
    assert claim_holders(claims) == {"n1": {"ml/train-0", "claim:ml/forged"}}


def test_a_slice_routes_capacity_when_its_devices_change() -> None:
    eight, four = attachment_slice("n1", 8), attachment_slice("n1", 4)
    assert attachment_slice_changed(eight, attachment_slice("n1", 8)).capacity is None
    assert attachment_slice_changed(eight, four).capacity is False
    assert attachment_slice_changed(None, four).capacity is True
    assert attachment_slice_changed(four, None).capacity is False


def test_a_claim_outside_the_records_moves_usage_when_it_takes_or_frees_a_device() -> None:
    unallocated = channel_claim("forged", None)
    allocated = channel_claim("forged", "n1")

    def nobody(claim: ResourceClaim) -> bool:
        return False

    taken = claim_changed(unallocated, allocated, accounted=nobody)
    freed = claim_changed(allocated, None, accounted=nobody)
    assert (taken.usage, freed.usage) == (False, True)
    # The claim holds a GPU of NVIDIA's driver too: capacity moves with it.
    assert (taken.capacity, freed.capacity) == (False, True)
    assert claim_changed(unallocated, allocated, accounted=lambda claim: True).usage is None
