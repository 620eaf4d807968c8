"""The shared scheduling predicates: taints, a pod's node selector and affinity, request fit."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from shared.kube.affinity import NodeSelector
from shared.kube.models import Pod, Taint, Toleration
from shared.scheduling.requests import insufficient, pod_requests, pods_that_fit
from shared.scheduling.selectors import pod_matches_node
from shared.scheduling.taints import untolerated_taint

GI = 2**30 * 1000
GPU_TAINT = Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule")


@pytest.mark.parametrize(
    ("taints", "tolerations", "first"),
    [
        ((), (), None),
        ((GPU_TAINT,), (), GPU_TAINT),
        ((GPU_TAINT,), (Toleration(key="nvidia.com/gpu", operator="Exists"),), None),
        ((GPU_TAINT,), (Toleration(key="nvidia.com/gpu", value="absent"),), GPU_TAINT),
        ((GPU_TAINT,), (Toleration(operator="Exists"),), None),
        # PreferNoSchedule never filters; NoExecute does.
        ((Taint(key="a", effect="PreferNoSchedule"),), (), None),
        ((Taint(key="a", effect="NoExecute"),), (), Taint(key="a", effect="NoExecute")),
        (
            (GPU_TAINT, Taint(key="b", effect="NoSchedule")),
            (Toleration(key="nvidia.com/gpu", value="present", effect="NoSchedule"),),
            Taint(key="b", effect="NoSchedule"),
        ),
    ],
)
def test_the_first_untolerated_blocking_taint(
    taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...], first: Taint | None
) -> None:
    assert untolerated_taint(taints, tolerations) == first


def affinity(*terms: list[dict[str, Any]]) -> NodeSelector:
    return msgspec.convert(
        {"nodeSelectorTerms": [{"matchExpressions": term} for term in terms]}, type=NodeSelector
    )


POOL_A = {"pool": "a", "kubernetes.io/hostname": "n1"}


@pytest.mark.parametrize(
    ("selector", "required", "matches"),
    [
        ({}, None, True),
        ({"pool": "a"}, None, True),
        ({"pool": "b"}, None, False),
        ({}, affinity([{"key": "pool", "operator": "In", "values": ["a", "b"]}]), True),
        ({}, affinity([{"key": "pool", "operator": "NotIn", "values": ["a"]}]), False),
        # Terms are ORed, expressions in a term ANDed; both the selector and affinity must hold.
        (
            {},
            affinity(
                [{"key": "pool", "operator": "In", "values": ["b"]}],
                [{"key": "pool", "operator": "Exists"}],
            ),
            True,
        ),
        ({"pool": "b"}, affinity([{"key": "pool", "operator": "Exists"}]), False),
    ],
)
def test_a_pods_node_selector_and_required_affinity(
    selector: dict[str, str], required: NodeSelector | None, matches: bool
) -> None:
    assert pod_matches_node(selector, required, name="n1", labels=POOL_A) is matches


def make_pod(spec: dict[str, Any]) -> Pod:
    return msgspec.convert({"metadata": {"name": "p"}, "spec": spec}, type=Pod)


def test_requests_add_up_over_containers_and_take_the_largest_init_container() -> None:
    pod = make_pod(
        {
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}},
                {"name": "b", "resources": {"limits": {"cpu": "500m", "memory": "3Gi"}}},
            ],
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "8"}}}],
            "overhead": {"memory": "1Gi"},
        }
    )
    found = pod_requests(pod.spec.containers, pod.spec.init_containers, pod.spec.overhead)
    assert found.requests == {"cpu": 8000, "memory": 5 * GI}


ALLOCATABLE = {"cpu": 144_000, "memory": 960 * GI, "pods": 110_000}


@pytest.mark.parametrize(
    ("requests", "requested", "pods", "fit", "short"),
    [
        ({"memory": 400 * GI}, {}, 0, 2, ()),
        ({"memory": 400 * GI}, {"memory": 600 * GI}, 1, 0, ("memory",)),
        ({"cpu": 100_000, "memory": 100 * GI}, {}, 0, 1, ()),
        ({"cpu": 1000}, {}, 110, 0, ("pods",)),
        ({"example.com/nic": 1000}, {}, 0, 0, ("example.com/nic",)),
        ({}, {}, 0, 4, ()),
    ],
)
def test_how_many_more_pods_fit_and_what_is_short(
    requests: dict[str, int],
    requested: dict[str, int],
    pods: int,
    fit: int,
    short: tuple[str, ...],
) -> None:
    kwargs: dict[str, Any] = {"allocatable": ALLOCATABLE, "requested": requested, "pods": pods}
    assert pods_that_fit(requests, most=4, **kwargs) == fit
    assert insufficient(requests, **kwargs) == short
