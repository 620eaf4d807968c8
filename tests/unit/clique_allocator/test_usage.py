"""What pods on each node request besides GPUs: recorded slots once, other bound pods once."""

from __future__ import annotations

import msgspec

from services.clique_allocator.eligibility import NodeUse
from services.clique_allocator.usage import usage_table
from shared.crds.placement import Placement, PodRef, SliceMember
from shared.kube.models import Pod
from tests.unit.clique_allocator.builders import pod, record

GI = 2**30 * 1000


def placement(spec: object) -> Placement:
    body = {
        "metadata": {"name": "train", "namespace": "default"},
        "spec": msgspec.to_builtins(spec),
    }
    return msgspec.convert(body, type=Placement)


def test_slots_count_the_domains_pod_bound_or_not_and_other_bound_pods_count_their_own() -> None:
    # train holds two 1-GPU slots on a-n00: p0 pinned (not bound yet) and one free slot.
    spec = record(("a-n00", 2, ("p0",)), gpus_per_pod=1)
    seated = pod("p0", gpus=1, pinned_to="a-n00", requests={"memory": "100Gi"})
    bound_then_recorded = pod("p0", gpus=1, node_name="a-n00", requests={"memory": "100Gi"})
    stranger = pod("x", gpus=0, template=None, gated=False, node_name="a-n00",
                   phase="Running", requests={"memory": "50Gi", "cpu": "4"})  # fmt: skip
    pods = {"default/p0": seated, "default/x": stranger}
    for p0 in (seated, bound_then_recorded):
        pods["default/p0"] = p0
        on_node: dict[str, list[Pod]] = {"a-n00": [stranger] + ([p0] if p0.spec.node_name else [])}

        def bound(node: str, on_node: dict[str, list[Pod]] = on_node) -> list[Pod]:
            return on_node.get(node, [])

        table = usage_table(
            gpu_nodes=["a-n00", "a-n01"],
            placements={"default/train": placement(spec)},
            pod=pods.get,
            bound=bound,
        )
        assert table.slots["default/train"] == {
            "a-n00": NodeUse(requested={"memory": 200 * GI}, pods=2, attachments=2)
        }
        assert table.bound == {"a-n00": NodeUse(requested={"memory": 50 * GI, "cpu": 4000}, pods=1)}
        assert table.others("default/train") == table.bound
        assert table.others("default/other")["a-n00"] == NodeUse(
            requested={"memory": 250 * GI, "cpu": 4000}, pods=3, attachments=2
        )


def test_pods_without_gpus_count_their_own_requests_and_every_holder_a_device() -> None:
    # train: one GPU slot on a-n00 and a helper without GPUs seated on a-n01.
    spec = record(("a-n00", 1, ("p0",)), gpus_per_pod=1)
    piece = spec.slices[0]
    helper_seat = SliceMember(
        node="a-n01", slot=1, channel_only_pods=(PodRef(name="helper", uid="helper-uid"),)
    )
    spec = msgspec.structs.replace(
        spec,
        channel_only=1,
        slices=(msgspec.structs.replace(piece, members=(*piece.members, helper_seat)),),
    )
    helper = pod("helper", gpus=0, pinned_to="a-n01", requests={"cpu": "2"})
    pods = {"default/p0": pod("p0", gpus=1, pinned_to="a-n00"), "default/helper": helper}
    holders = {
        # The helper's own claim (seated: counted once), and a hand-made claim's device.
        "a-n01": {"default/helper", "claim:default/forged"},
    }
    table = usage_table(
        gpu_nodes=["a-n00", "a-n01"],
        placements={"default/train": placement(spec)},
        pod=pods.get,
        bound=lambda node: [],
        holders=holders,
    )
    assert table.slots["default/train"] == {
        "a-n00": NodeUse(requested={}, pods=1, attachments=1),
        "a-n01": NodeUse(requested={"cpu": 2000}, pods=1, attachments=1),
    }
    assert table.bound == {"a-n01": NodeUse(attachments=1)}
    assert table.total["a-n01"].attachments == 2
    assert table.own("default/train")["a-n01"].pods == 1
