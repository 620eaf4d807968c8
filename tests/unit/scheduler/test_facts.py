"""What a pod and a node reduce to."""

from __future__ import annotations

import msgspec

from sim.scheduler.facts import DEFAULT_CPU_MILLI, DEFAULT_MEMORY_MILLI, node_facts, pod_facts
from sim.scheduler.objects import Pod
from tests.unit.scheduler.builders import make_node, make_pod


def test_requests_add_up_over_containers_and_init_containers_take_the_max() -> None:
    pod = msgspec.convert(
        {
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {
                "containers": [
                    {"name": "a", "resources": {"requests": {"cpu": "500m"}}},
                    {"name": "b", "resources": {"limits": {"nvidia.com/gpu": "2", "cpu": "1"}}},
                ],
                "initContainers": [
                    {"name": "init", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}
                ],
                "overhead": {"cpu": "100m"},
            },
        },
        Pod,
    )
    got = pod_facts(pod)
    assert got.requests == {"cpu": 2100, "memory": 2**30 * 1000, "nvidia.com/gpu": 2000}
    assert got.nonzero_cpu == 2000
    assert got.nonzero_memory == 2**30 * 1000


def test_a_pod_that_requests_nothing_scores_with_stand_ins() -> None:
    got = pod_facts(make_pod("p"))
    assert got.requests == {}
    assert (got.nonzero_cpu, got.nonzero_memory) == (DEFAULT_CPU_MILLI, DEFAULT_MEMORY_MILLI)


def test_claim_references() -> None:
    pod = make_pod(
        "p",
        claims=[
            {"name": "direct", "resourceClaimName": "shared"},
            {"name": "made", "resourceClaimTemplateName": "tmpl"},
            {"name": "later", "resourceClaimTemplateName": "tmpl"},
            {"name": "skipped", "resourceClaimTemplateName": "tmpl"},
        ],
        claim_statuses=[{"name": "made", "resourceClaimName": "p-made"}, {"name": "skipped"}],
    )
    refs = [(r.pod_claim, r.claim_name, r.from_template, r.needed) for r in pod_facts(pod).claims]
    assert refs == [
        ("direct", "shared", False, True),
        ("made", "p-made", True, True),
        ("later", "", True, True),
        ("skipped", "", True, False),
    ]


def test_affinity_terms_default_to_the_pods_namespace() -> None:
    pod = make_pod(
        "p",
        namespace="team",
        affinity={
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "k", "labelSelector": {}},
                    {"topologyKey": "k", "labelSelector": {}, "namespaces": ["x"]},
                    {"topologyKey": "k", "labelSelector": {}, "namespaceSelector": {}},
                ]
            }
        },
    )
    assert [t.namespaces for t in pod_facts(pod).affinity] == [
        frozenset({"team"}),
        frozenset({"x"}),
        frozenset(),
    ]


def test_node_allocatable_falls_back_to_capacity() -> None:
    node = make_node("n1", gpus=4)
    assert node_facts(node).allocatable["nvidia.com/gpu"] == 4000
    bare = msgspec.structs.replace(
        node, status=msgspec.structs.replace(node.status, allocatable={}, capacity={"cpu": "2"})
    )
    assert node_facts(bare).allocatable == {"cpu": 2000}
