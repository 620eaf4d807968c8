"""Counting GPUs of NVIDIA's GPU DRA driver (published, tainted, claimed outside the records),
a node's size and ways with both APIs, GPUs per pod from claims, and the view a gang is placed
in (only nodes that serve its ways)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from services.clique_allocator.dragpus import (
    NodeDraGpus,
    PodGpus,
    dra_gpus,
    pod_gpus,
)
from services.clique_allocator.gang import GpuCount, GpuMismatch, gpus_per_pod
from services.clique_allocator.gpuapis import (
    apis_needed,
    channel_only_test,
    gpu_counter,
    pod_asks,
    restrict,
)
from services.clique_allocator.nodes import build_cliques, node_facts
from services.clique_allocator.objects import claim_owner
from services.clique_allocator.placement import ClusterView
from shared.crds.gpuclaims import claim_spec_gpus
from shared.kube.models import DeviceTaintRule, Pod, ResourceClaim, ResourceSlice

from .builders import node, pod

DRIVER = "gpu.nvidia.com"


def gpu_slice(
    node_name: str,
    gpus: int = 4,
    *,
    generation: int = 0,
    taints: dict[int, str] | None = None,
    driver: str = DRIVER,
    kind: str = "gpu",
) -> ResourceSlice:
    devices = []
    for index in range(gpus):
        device: dict[str, Any] = {"name": f"gpu-{index}", "attributes": {"type": {"string": kind}}}
        if taints and index in taints:
            device["taints"] = [
                {"key": "gpu.nvidia.com/xid", "value": "79", "effect": taints[index]}
            ]
        devices.append(device)
    body = {
        "metadata": {"name": f"{node_name}-{driver}-{generation}"},
        "spec": {
            "driver": driver,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": generation},
            "devices": devices,
        },
    }
    return msgspec.convert(body, type=ResourceSlice)


def claim(name: str, devices: list[tuple[str, str]], *, pod_owner: str = "") -> ResourceClaim:
    owners = [
        {"apiVersion": "v1", "kind": "Pod", "name": pod_owner, "uid": "u", "controller": True}
    ]
    results = [
        {"request": "gpus", "driver": DRIVER, "pool": pool, "device": device}
        for pool, device in devices
    ]
    body = {
        "metadata": {
            "name": name,
            "namespace": "default",
            "ownerReferences": owners if pod_owner else [],
        },
        "status": {"allocation": {"devices": {"results": results}}},
    }
    return msgspec.convert(body, type=ResourceClaim)


def rule(selector: dict[str, str] | None, effect: str = "NoSchedule") -> DeviceTaintRule:
    spec: dict[str, Any] = {"taint": {"key": "cdo.dev/gpu-fault", "effect": effect}}
    if selector is not None:
        spec["deviceSelector"] = selector
    return msgspec.convert({"metadata": {"name": "r"}, "spec": spec}, type=DeviceTaintRule)


def never(_: ResourceClaim) -> bool:
    return False


@pytest.mark.parametrize(
    ("slices", "rules", "claims", "expected"),
    [
        # Published: the driver's whole GPUs, newest generation only.
        ([gpu_slice("n1")], [], [], {"n1": NodeDraGpus(published=4)}),
        ([gpu_slice("n1", 2), gpu_slice("n1", 4, generation=1)], [], [],
         {"n1": NodeDraGpus(published=4)}),
        ([gpu_slice("n1", driver="compute-domain.cdo.dev")], [], [], {}),
        ([gpu_slice("n1", kind="mig")], [], [], {}),
        # Tainted in the slice: NoSchedule and NoExecute block, None does not.
        ([gpu_slice("n1", taints={0: "NoSchedule", 1: "NoExecute", 2: "None"})], [], [],
         {"n1": NodeDraGpus(published=4, tainted=2)}),
        # DeviceTaintRules: by device; without a selector none; an empty one all; None effect no.
        ([gpu_slice("n1")], [rule({"driver": DRIVER, "pool": "n1", "device": "gpu-3"})], [],
         {"n1": NodeDraGpus(published=4, tainted=1)}),
        ([gpu_slice("n1")], [rule(None)], [], {"n1": NodeDraGpus(published=4)}),
        ([gpu_slice("n1")], [rule({})], [], {"n1": NodeDraGpus(published=4, tainted=4)}),
        ([gpu_slice("n1")], [rule({}, effect="None")], [], {"n1": NodeDraGpus(published=4)}),
        ([gpu_slice("n1")], [rule({"driver": "other.example.com"})], [],
         {"n1": NodeDraGpus(published=4)}),
        # Claimed: devices allocated outside the records; a tainted one counts once.
        ([gpu_slice("n1", taints={0: "NoSchedule"})], [],
         [claim("c", [("n1", "gpu-0"), ("n1", "gpu-1")])],
         {"n1": NodeDraGpus(published=4, tainted=1, claimed=1)}),
        ([gpu_slice("n1"), gpu_slice("n2")], [], [claim("c", [("n2", "gpu-0")])],
         {"n1": NodeDraGpus(published=4), "n2": NodeDraGpus(published=4, claimed=1)}),
    ],
)  # fmt: skip
def test_dra_gpu_counts(
    slices: list[ResourceSlice],
    rules: list[DeviceTaintRule],
    claims: list[ResourceClaim],
    expected: dict[str, NodeDraGpus],
) -> None:
    assert dra_gpus(slices, rules, claims, accounted=never) == expected


def test_claims_of_recorded_pods_are_accounted_by_their_placement() -> None:
    claims = [claim("a", [("n1", "gpu-0")], pod_owner="seated"), claim("b", [("n1", "gpu-1")])]
    found = dra_gpus(
        [gpu_slice("n1")],
        [],
        claims,
        accounted=lambda c: claim_owner(c) == ("default", "seated"),
    )
    assert found == {"n1": NodeDraGpus(published=4, claimed=1)}


@pytest.mark.parametrize(
    ("allocatable", "published", "gpus", "apis"),
    [
        (4, 0, 4, {"device-plugin"}),
        (0, 4, 4, {"dra"}),
        (4, 4, 4, {"device-plugin", "dra"}),
        (3, 4, 4, {"device-plugin", "dra"}),
        (0, 0, None, None),
    ],
)
def test_node_size_and_ways(
    allocatable: int, published: int, gpus: int | None, apis: set[str] | None
) -> None:
    facts = node_facts(node("n1", gpus=allocatable), NodeDraGpus(published=published))
    if gpus is None:
        assert facts is None
        return
    assert facts is not None
    assert (facts.gpus, set(facts.gpu_apis)) == (gpus, apis)


def exactly(count: int | None = None, mode: str | None = None, klass: str = DRIVER) -> Any:
    body: dict[str, Any] = {"deviceClassName": klass}
    if count is not None:
        body["count"] = count
    if mode is not None:
        body["allocationMode"] = mode
    return {"name": "r", "exactly": body}


@pytest.mark.parametrize(
    ("requests", "expected"),
    [
        ([exactly(4)], (4, False)),
        ([exactly()], (1, False)),
        ([exactly(2), exactly(1)], (3, False)),
        ([exactly(mode="All")], (0, True)),
        ([exactly(2, klass="compute-domain-default-channel.nvidia.com")], (0, False)),
        ([{"name": "r", "firstAvailable": [{"name": "a"}]}], (0, False)),
    ],
)
def test_claim_spec_gpus(requests: list[Any], expected: tuple[int, bool]) -> None:
    assert claim_spec_gpus({"devices": {"requests": requests}}) == expected


def dra_pod(name: str, *, gpus: int = 0, template: str = "gpus-4") -> Pod:
    made = pod(name, gpus=gpus)
    claims = [*msgspec.to_builtins(made.spec.resource_claims)]
    claims.append({"name": "gpus", "resourceClaimTemplateName": template})
    body = msgspec.to_builtins(made)
    body["spec"]["resourceClaims"] = claims
    return msgspec.convert(body, type=Pod)


TEMPLATES = {
    "gpus-4": {"devices": {"requests": [exactly(4)]}},
    "gpus-2": {"devices": {"requests": [exactly(2)]}},
    "whole": {"devices": {"requests": [exactly(mode="All")]}},
}


def lookup(_: str, name: str, template: bool) -> dict[str, Any] | None:
    return TEMPLATES.get(name) if template else None


def test_a_pod_asks_for_no_gpu_only_when_every_claim_of_it_is_known() -> None:
    channel = {"devices": {"requests": [{"name": "channel", "exactly": {
        "deviceClassName": "compute-domain-channel.cdo.dev"}}]}}  # fmt: skip
    known = {**TEMPLATES, "train-rct": channel}

    def knows(_: str, name: str, template: bool) -> dict[str, Any] | None:
        return known.get(name) if template else None

    bare = pod("smoke", gpus=0)  # the domain's channel only
    helper = dra_pod("helper", template="train-rct")  # two claims, neither asks for a GPU
    worker = dra_pod("worker")
    plugin = pod("plugin", gpus=1)
    asks = pod_asks([bare, helper, worker, plugin], knows)
    channel_only = channel_only_test(asks)
    assert [channel_only(p) for p in (bare, helper, worker, plugin)] == [True, True, False, False]
    # A claim whose template is not in the cache yet: not known to ask for nothing.
    unknown = pod_asks([dra_pod("later", template="unknown")], knows)
    assert unknown["later"].unknown
    assert not channel_only_test(unknown)(dra_pod("later", template="unknown"))


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        ([dra_pod("a"), dra_pod("b")], GpuCount(gpus=4)),
        # Mixed: 2 through the device plugin + 2 through DRA agrees with 4 through either.
        ([dra_pod("a", gpus=2, template="gpus-2"), pod("b", gpus=4)], GpuCount(gpus=4)),
        ([dra_pod("a", template="gpus-2"), pod("b", gpus=4)],
         GpuMismatch(message="the domain's pods ask for different GPU counts (2, 4); "
                             "one gang takes one size")),
        # allocationMode All: the cluster's largest node (8 here).
        ([dra_pod("a", template="whole")], GpuCount(gpus=8)),
    ],
)  # fmt: skip
def test_gpus_per_pod_with_claims(pods: list[Pod], expected: GpuCount | GpuMismatch) -> None:
    view = ClusterView.build(
        cliques=build_cliques(
            [f for f in (node_facts(node("n1", gpus=4)), node_facts(node("n2", gpus=8))) if f]
        ),
        reservations=[],
    )
    asks = pod_asks(pods, lookup)
    assert gpus_per_pod(pods, gpu_counter(asks, view)) == expected


@pytest.mark.parametrize(
    ("asks", "needed"),
    [
        ([PodGpus(device_plugin=4)], {"device-plugin"}),
        ([PodGpus(dra=4)], {"dra"}),
        ([PodGpus(whole_node=True)], {"dra"}),
        ([PodGpus(device_plugin=2), PodGpus(dra=2)], {"device-plugin", "dra"}),
    ],
)
def test_ways_a_gang_needs(asks: list[PodGpus], needed: set[str]) -> None:
    assert apis_needed(asks) == needed


def test_a_gang_is_placed_only_on_nodes_serving_its_ways() -> None:
    facts = {
        "plugin": node_facts(node("plugin", gpus=4)),
        "dra": node_facts(node("dra", gpus=0), NodeDraGpus(published=4)),
        "both": node_facts(node("both", gpus=4), NodeDraGpus(published=4)),
    }
    known = {name: found for name, found in facts.items() if found is not None}
    view = ClusterView.build(cliques=build_cliques(known.values()), reservations=[])

    def usable(needed: set[str]) -> set[str]:
        restricted = restrict(view, known, frozenset(needed))
        return {n.name for state in restricted.cliques for n in state.nodes if n.usable}

    assert usable({"device-plugin"}) == {"plugin", "both"}
    assert usable({"dra"}) == {"dra", "both"}
    assert usable({"device-plugin", "dra"}) == {"both"}
    assert restrict(view, known, frozenset({"dra"})).clique(view.cliques[0].id) is not None


def test_a_pods_claims_without_a_known_spec_count_nothing() -> None:
    assert pod_gpus(dra_pod("a", template="unknown"), lookup) == PodGpus(
        device_plugin=0, unknown=True
    )
