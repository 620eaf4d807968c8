"""Which nodes a gang's pods can be scheduled on, how many fit each, and the wait message."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from services.clique_allocator.eligibility import Neighbour, NodeUse, node_limits
from services.clique_allocator.needs import gang_needs
from services.clique_allocator.nodes import NodeFacts, node_facts
from shared.kube.models import Node, Pod
from tests.unit.clique_allocator.builders import CLIQUE_A, CLIQUE_B, node, pod

GI = 2**30 * 1000
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
TOLERATE = {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}


def facts(*nodes: Node) -> list[NodeFacts]:
    found = [node_facts(n) for n in nodes]
    assert all(f is not None for f in found)
    return [f for f in found if f is not None]


def limits_of(
    nodes: list[NodeFacts],
    pods: list[Pod],
    *,
    gpus: int = 4,
    others: dict[str, NodeUse] | None = None,
    neighbours: tuple[Neighbour, ...] = (),
) -> Any:
    needs = gang_needs(pods, pin_label="kubernetes.io/hostname")
    return node_limits(
        needs, nodes=nodes, others=others or {}, neighbours=neighbours, gpus_per_pod=gpus
    )


def test_pods_without_constraints_are_limited_by_nothing() -> None:
    limits = limits_of(facts(node("a0"), node("a1")), [pod("p0")])
    assert not limits.nodes and limits.why == ""


def test_a_taint_the_pods_do_not_tolerate_rules_the_node_out_and_is_named() -> None:
    nodes = facts(node("a0", taints=[GPU_TAINT]), node("a1", taints=[GPU_TAINT]), node("a2"))
    limits = limits_of(nodes, [pod("p0")])
    assert limits.excluded == {"a0", "a1"}
    assert limits.why == (
        f"2 nodes of clique {CLIQUE_A} lack the toleration for nvidia.com/gpu=present:NoSchedule"
    )
    tolerated = limits_of(nodes, [pod("p0", spec_extra=TOLERATE)])
    assert not tolerated.excluded


def test_the_health_models_own_taints_are_left_to_it() -> None:
    faulted = node("a0", taints=[{"key": "cdo.dev/gpu-fault", "effect": "NoSchedule"}])
    limits = limits_of(facts(faulted, node("a1")), [pod("p0")])
    assert not limits.excluded  # the node is unusable to the engine already


def test_a_pool_selector_keeps_only_matching_nodes_and_ignores_the_allocators_own_pin() -> None:
    nodes = facts(
        node("a0", labels={"pool": "x"}),
        node("a1", labels={"pool": "y"}),
        node("b0", clique=CLIQUE_B, labels={"pool": "y"}),
    )
    selector = {"nodeSelector": {"pool": "x"}}
    limits = limits_of(nodes, [pod("p0", spec_extra=selector, pinned_to="a1")])
    assert limits.excluded == {"a1", "b0"}
    assert f"1 node of clique {CLIQUE_A} does not match" in limits.why
    assert f"1 node of clique {CLIQUE_B} does not match" in limits.why


def test_required_node_affinity_filters_and_preferred_affinity_weighs() -> None:
    nodes = facts(node("a0", labels={"zone": "z1"}), node("a1", labels={"zone": "z2"}))
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z2"]}]}
    preferred = {"affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "preference": term}]
    }}}  # fmt: skip
    assert limits_of(nodes, [pod("p0", spec_extra=preferred)]).preferred == {"a1": 5}
    required = {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
    }}}  # fmt: skip
    assert limits_of(nodes, [pod("p0", spec_extra=required)]).excluded == {"a0"}


@pytest.mark.parametrize(
    ("memory", "used", "gpus", "excluded", "most"),
    [
        ("960Gi", 0, 1, False, 2),  # two 400Gi pods fit: capped at 2 of 4
        ("960Gi", 600, 1, True, None),  # 360Gi left: none
        ("256Gi", 0, 4, True, None),
        ("960Gi", 0, 4, False, None),  # one 4-GPU pod per node anyway: no cap to record
    ],
)
def test_memory_caps_or_rules_out_a_node(
    memory: str, used: int, gpus: int, excluded: bool, most: int | None
) -> None:
    nodes = facts(node("a0", allocatable={"memory": memory}))
    others = {"a0": NodeUse(requested={"memory": used * GI}, pods=1)} if used else {}
    limits = limits_of(nodes, [pod("p0", gpus=gpus, requests={"memory": "400Gi"})], gpus=gpus,
                       others=others)  # fmt: skip
    assert ("a0" in limits.excluded) is excluded
    assert limits.most_pods.get("a0") == most
    if excluded:
        assert "lacks the memory a pod asks for" in limits.why


def test_pods_of_one_gang_that_differ_are_placed_for_the_worst_of_them() -> None:
    nodes = facts(node("a0", allocatable={"memory": "960Gi"}), node("a1", taints=[GPU_TAINT]))
    pods = [
        pod("p0", gpus=1, requests={"memory": "100Gi"}, spec_extra=TOLERATE),
        pod("p1", gpus=1, requests={"memory": "400Gi"}),
    ]
    limits = limits_of(nodes, pods, gpus=1)
    assert limits.excluded == {"a1"}  # p1 does not tolerate the taint
    assert limits.most_pods == {"a0": 2}  # 400Gi each


def test_hostname_anti_affinity_on_the_gangs_own_pods_allows_one_per_node() -> None:
    anti = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "t"}}, "topologyKey": "kubernetes.io/hostname"}
    ]}}}  # fmt: skip
    nodes = facts(node("a0"), node("a1"))
    gang = [pod("p0", gpus=1, labels={"app": "t"}, spec_extra=anti)]
    other = Neighbour(node="a1", namespace="default", labels={"app": "t"})
    limits = limits_of(nodes, gang, gpus=1, neighbours=(other,))
    assert limits.most_pods == {"a0": 1}
    assert limits.excluded == {"a1"}
    assert "holds pods the pods' anti-affinity keeps them from" in limits.why


def test_free_attachment_devices_cap_the_gpu_pods_a_node_takes() -> None:
    # Each node's cdo slice lists 4 devices; others hold 3 of a0's and all of a1's.
    nodes = [
        msgspec.structs.replace(found, attachments=4)
        for found in facts(node("a0"), node("a1"), node("a2"))
    ]
    others = {"a0": NodeUse(attachments=3), "a1": NodeUse(attachments=4)}
    limits = limits_of(nodes, [pod("p0", gpus=1)], gpus=1, others=others)
    assert limits.most_pods == {"a0": 1}
    assert limits.excluded == {"a1"}
    assert f"1 node of clique {CLIQUE_A} has no free IMEX channel attachment device" in limits.why
    # A node whose slice the allocator has not seen is not limited by devices.
    unknown = limits_of(facts(node("a0")), [pod("p0", gpus=1)], gpus=1, others=others)
    assert not unknown.nodes


def test_pods_without_gpus_are_not_capped_by_gpus_nor_by_devices_and_name_no_cap() -> None:
    nodes = [
        msgspec.structs.replace(found, attachments=2)
        for found in facts(node("a0", allocatable={"pods": "3"}), node("a1"))
    ]
    others = {"a0": NodeUse(pods=1, attachments=2), "a1": NodeUse(attachments=2)}
    limits = limits_of(nodes, [pod("h", gpus=0)], gpus=0, others=others)
    # Devices are the pods' own step to weigh (planning/channelonly.py); pod room caps a0.
    assert not limits.excluded
    assert limits.most_pods["a0"] == 2
    assert limits.why == ""
