"""From a claim to its pod's slice: the decision, and every way it refuses.

The default record is a two-slice Placement of ``team-a/train`` (8 ranks): slice 0 (ranks 0-3,
channel 3) in clique B on nodes m1 and m2, slice 1 (ranks 4-7, channel 7) in clique A on nodes
n1 and n2. The agent under test runs on n1, in clique A.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from services.imex_agent.cdi import ChannelGrant, SliceSeat
from services.imex_agent.checkpoint import DeviceRecord
from services.imex_agent.claims import (
    ClaimRefusedError,
    PlacementView,
    WithoutChannel,
    decide,
    decode_placement,
)
from shared.crds.names import ALLOCATOR_USER, WRITTEN_BY_ANNOTATION
from shared.kube.models import ResourceClaim
from shared.kubeletapi import Claim

DRIVER = "compute-domain.cdo.dev"
CLIQUE = "6f0b6a9c-1b8e-4a52-9e2b-2a1e5b7a0c11.1"
CLIQUE_B = "6f0b6a9c-1b8e-4a52-9e2b-2a1e5b7a0c11.2"
CLAIM = Claim(namespace="team-a", uid="c-1", name="train-5-channel")


def pod_ref(name: str, *, resource: str = "pods") -> dict[str, str]:
    return {"resource": resource, "name": name, "uid": f"uid-{name}"}


def claim_object(
    *,
    uid: str = "c-1",
    labels: dict[str, str] | None = None,
    results: list[dict[str, str]] | None = None,
    pool: str = "n1",
    reserved: list[dict[str, str]] | None = None,
) -> ResourceClaim:
    body: dict[str, Any] = {
        "metadata": {
            "name": "train-5-channel",
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
                        {"request": "channel", "driver": DRIVER, "pool": pool, "device": "attach-2"}
                    ]
                    if results is None
                    else results
                }
            },
            "reservedFor": [pod_ref("train-5")] if reserved is None else reserved,
        },
    }
    return msgspec.convert(body, ResourceClaim)


def member(node: str, slot: int, *ranks: int) -> dict[str, Any]:
    return {
        "node": node,
        "slot": slot,
        "gpus": 4 * len(ranks),
        "pods": [
            {"name": f"train-{rank}", "rank": rank, "uid": f"uid-train-{rank}"} for rank in ranks
        ],
    }


TWO_SLICES: list[dict[str, Any]] = [
    {
        "index": 0,
        "clique": CLIQUE_B,
        "channel": 3,
        "firstRank": 0,
        "size": 4,
        "members": [member("m1", 0, 0, 1), member("m2", 1, 2, 3)],
    },
    {
        "index": 1,
        "clique": CLIQUE,
        "channel": 7,
        "firstRank": 4,
        "size": 4,
        "members": [member("n1", 0, 4, 5), member("n2", 1, 6, 7)],
    },
]

OLD_SHAPE: dict[str, Any] = {
    "clique": CLIQUE,
    "channel": 9,
    "gpusPerPod": 4,
    "size": 4,
    # Pods as plain names; ranks go in slot order, then by name: train-3 is rank 3.
    "members": [
        {"node": "n1", "slot": 1, "gpus": 8, "pods": ["train-3", "train-2"]},
        {"node": "n0", "slot": 0, "gpus": 8, "pods": ["train-0", "train-1"]},
    ],
}


def placement(
    *,
    namespace: str = "team-a",
    owner: str = "d-1",
    slices: list[dict[str, Any]] | None = None,
    spec: dict[str, Any] | None = None,
    written_by: str = ALLOCATOR_USER,
) -> PlacementView:
    body: dict[str, Any] = {
        "metadata": {
            "name": "train",
            "namespace": namespace,
            "annotations": {WRITTEN_BY_ANNOTATION: written_by} if written_by else {},
            "ownerReferences": [
                {
                    "apiVersion": "resource.nvidia.com/v1beta1",
                    "kind": "ComputeDomain",
                    "name": "train",
                    "uid": owner,
                }
            ],
        },
        "spec": spec
        if spec is not None
        else {"gpusPerPod": 4, "size": 8, "slices": TWO_SLICES if slices is None else slices},
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
        "writer": ALLOCATOR_USER,
    }
    arguments.update(overrides)
    return decide(**arguments)


def test_a_pod_seated_in_slice_1_gets_that_slices_channel_and_its_slice_rank() -> None:
    resolution = run()
    assert resolution.grant == ChannelGrant(
        claim_uid="c-1",
        domain_namespace="team-a",
        domain_name="train",
        domain_uid="d-1",
        channel=7,
        seat=SliceSeat(clique=CLIQUE, index=1, size=4, rank=5, slice_rank=1),
    )
    assert resolution.devices == (DeviceRecord(request="channel", pool="n1", device="attach-2"),)


@pytest.mark.parametrize(
    ("pod", "node", "clique", "channel", "seat"),
    [
        (
            "train-4",
            "n1",
            CLIQUE,
            7,
            SliceSeat(clique=CLIQUE, index=1, size=4, rank=4, slice_rank=0),
        ),
        (
            "train-7",
            "n2",
            CLIQUE,
            7,
            SliceSeat(clique=CLIQUE, index=1, size=4, rank=7, slice_rank=3),
        ),
        (
            "train-0",
            "m1",
            CLIQUE_B,
            3,
            SliceSeat(clique=CLIQUE_B, index=0, size=4, rank=0, slice_rank=0),
        ),
        (
            "train-3",
            "m2",
            CLIQUE_B,
            3,
            SliceSeat(clique=CLIQUE_B, index=0, size=4, rank=3, slice_rank=3),
        ),
    ],
)
def test_every_pod_gets_the_channel_and_ranks_of_its_own_slice(
    pod: str, node: str, clique: str, channel: int, seat: SliceSeat
) -> None:
    resolution = run(obj=claim_object(pool=node, reserved=[pod_ref(pod)]), node=node, clique=clique)
    assert (resolution.grant.channel, resolution.grant.seat) == (channel, seat)


def test_an_old_shape_placement_grants_nothing_until_the_allocator_records_uids() -> None:
    """Its pods are plain names: which pod holds the seat is not known, so the claim waits
    (the allocator adds the uids at its next reconcile, then reads the record as one slice)."""
    with pytest.raises(ClaimRefusedError) as refused:
        run(obj=claim_object(reserved=[pod_ref("train-3")]), placement=placement(spec=OLD_SHAPE))
    assert refused.value.reason == "SeatWithoutUid"
    assert "retriable" in str(refused.value)


def test_a_hand_made_claim_copying_a_domains_labels_gets_nothing() -> None:
    """Labels, namespace and device are right, but its pod is no member of the domain."""
    with pytest.raises(ClaimRefusedError) as refused:
        run(obj=claim_object(reserved=[pod_ref("intruder")]))
    assert str(refused.value) == (
        "pod intruder (uid uid-intruder) is not a member of ComputeDomain team-a/train: the "
        "allocator pinned no pod of that name for it, so ResourceClaim team-a/train-5-channel "
        "gets no channel on node n1"
    )
    assert refused.value.reason == "NotPinned"


def test_a_pod_seated_on_another_node_is_refused_and_told_where_it_is_seated() -> None:
    with pytest.raises(ClaimRefusedError) as refused:
        run(obj=claim_object(reserved=[pod_ref("train-6")]))
    assert str(refused.value) == (
        "pod train-6 (uid uid-train-6) is pinned to node n2 for ComputeDomain team-a/train, "
        "not to node n1: ResourceClaim team-a/train-5-channel gets no channel here"
    )


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
        (
            {"obj": claim_object(reserved=[])},
            "ResourceClaim team-a/train-5-channel of ComputeDomain team-a/train on node n1 is "
            "reserved for no pod",
        ),
        (
            {"obj": claim_object(reserved=[pod_ref("train-5", resource="jobs")])},
            "reserved for no pod",
        ),
        (
            {"obj": claim_object(reserved=[pod_ref("train-4"), pod_ref("train-5")])},
            r"reserved for 2 pods \(train-4, train-5\)",
        ),
        ({"clique": None}, "has no NVLink clique"),
        (
            {"obj": claim_object(reserved=[pod_ref("train-1")])},
            r"pod train-1 \(uid uid-train-1\) is pinned to node m1 .*, not to node n1",
        ),
        (
            {"obj": claim_object(reserved=[{**pod_ref("train-5"), "uid": "recreated"}])},
            r"pod train-5 \(uid recreated\) is not the pod the allocator pinned as train-5 "
            r"for ComputeDomain team-a/train \(that one has uid uid-train-5\)",
        ),
        (
            {"clique": "other.1"},
            "pod train-5 is placed in slice 1 of ComputeDomain team-a/train, which is in "
            f"clique '{CLIQUE}'; node n1 is in clique 'other.1'",
        ),
        (
            {"placement": placement(slices=[])},
            r"pod train-5 \(uid uid-train-5\) is not a member of ComputeDomain team-a/train",
        ),
    ],
)
def test_refusals(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ClaimRefusedError, match=message):
        run(**overrides)


def test_a_claim_in_another_namespace_never_gets_that_domains_channel() -> None:
    """Even when its own namespace has a domain of the same name."""
    with pytest.raises(ClaimRefusedError, match="another namespace"):
        run(placement=placement(owner="someone-else"), elsewhere=placement(namespace="team-b"))


def test_a_placement_that_does_not_decode_is_a_refusal() -> None:
    body = msgspec.json.encode(
        {
            "metadata": {"name": "train", "namespace": "team-a"},
            "spec": {"gpusPerPod": 4, "size": 1, "slices": [{**TWO_SLICES[1], "channel": 5000}]},
        }
    )
    with pytest.raises(ClaimRefusedError, match="Placement team-a/train cannot be read"):
        decode_placement(body, namespace="team-a", name="train")
    assert decode_placement(None, namespace="team-a", name="train") is None
    decoded = decode_placement(
        msgspec.json.encode(msgspec.to_builtins(placement())), namespace="team-a", name="train"
    )
    assert decoded == placement()


def test_the_resolution_carries_the_placements_trace_annotations() -> None:
    view = placement()
    annotated = msgspec.structs.replace(
        view,
        metadata=msgspec.structs.replace(
            view.metadata,
            annotations={
                **view.metadata.annotations,
                "cdo.dev/trace-context": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                "kubectl.kubernetes.io/last-applied-configuration": "{}",
            },
        ),
    )
    assert run(placement=annotated).story == {
        "cdo.dev/trace-context": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    }
    assert run().story == {}


WITHOUT_NVLINK = {"gpusPerPod": 8, "size": 4, "multiNodeNvlink": False}


@pytest.mark.parametrize("clique", [None, CLIQUE])
def test_a_domain_without_nvlink_is_prepared_with_nothing_injected(clique: str | None) -> None:
    """Its record says so: any of its claims gets no channel, on a node with or without a
    clique (a node that later joins one does not hand out a channel nobody reserved)."""
    resolved = run(placement=placement(spec=WITHOUT_NVLINK), clique=clique)
    assert resolved == WithoutChannel(
        devices=(DeviceRecord(request="channel", pool="n1", device="attach-2"),)
    )


def test_a_domain_without_nvlink_still_checks_the_claim_and_its_placement() -> None:
    with pytest.raises(ClaimRefusedError, match="not made from a ComputeDomain's claim template"):
        run(placement=placement(spec=WITHOUT_NVLINK), obj=claim_object(labels={}))
    with pytest.raises(ClaimRefusedError, match="belongs to ComputeDomain uid d-0"):
        run(placement=placement(spec=WITHOUT_NVLINK, owner="d-0"))


@pytest.mark.parametrize(
    "written_by",
    ["", "system:serviceaccount:team-a:ci", "system:serviceaccount:cdo-other:cdo-clique-allocator"],
)
def test_a_placement_not_last_written_by_the_allocator_gives_no_channel(written_by: str) -> None:
    with pytest.raises(ClaimRefusedError) as refused:
        run(placement=placement(written_by=written_by))
    assert refused.value.reason == "NotWrittenByAllocator"
    assert f"not by the clique allocator ({ALLOCATOR_USER})" in str(refused.value)
    assert (written_by or "an unknown user") in str(refused.value)


def test_the_writer_the_agent_expects_is_its_setting() -> None:
    other = "system:serviceaccount:gpu-ops:cdo-clique-allocator"
    resolution = run(placement=placement(written_by=other), writer=other)
    assert resolution.grant.channel == 7
