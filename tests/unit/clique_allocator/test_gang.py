"""Gang sizing and GPUs per pod: tables of workloads and pods."""

from __future__ import annotations

import pytest

from services.clique_allocator.gang import (
    GangSize,
    GpuCount,
    GpuMismatch,
    UnknownSize,
    gang_size,
    gpus_per_pod,
    undeclared,
)
from services.clique_allocator.objects import Workload
from shared.kube.models import Pod

from .builders import pod, workload

RS = ("ReplicaSet", "train-rs", "rs-uid")


def lookup(**found: Workload) -> object:
    def get(kind: str, namespace: str, name: str) -> Workload | None:
        return found.get(f"{kind}/{name}")

    return get


def size(pods: list[Pod], explicit: int | None = None, **found: Workload) -> int | str:
    result = gang_size(explicit=explicit, pods=pods, workload=lookup(**found))  # type: ignore[arg-type]
    return result.pods if isinstance(result, GangSize) else result.message


@pytest.mark.parametrize(
    ("pods", "found", "explicit", "expected"),
    [
        pytest.param([pod("a", owner=RS)], {"ReplicaSet/train-rs": workload(replicas=18)}, None,
                     18, id="replicaset replicas, from its first pod"),
        pytest.param([pod("a", owner=RS)], {"ReplicaSet/train-rs": workload(replicas=18)}, 4,
                     4, id="spec.gang.size wins"),
        pytest.param([pod("a", owner=RS)], {"ReplicaSet/train-rs": workload()}, None,
                     1, id="replicas defaults to 1"),
        pytest.param([pod("a", owner=RS), pod("b", owner=RS)],
                     {"ReplicaSet/train-rs": workload(replicas=9)}, None,
                     9, id="one owner counted once"),
        pytest.param([pod("a", owner=RS),
                      pod("b", owner=("ReplicaSet", "train-rs2", "rs2-uid"))],
                     {"ReplicaSet/train-rs": workload(replicas=3),
                      "ReplicaSet/train-rs2": workload(replicas=2, uid="rs2-uid")}, None,
                     5, id="a rolling update counts old and new ReplicaSet"),
        pytest.param([pod("a", owner=("StatefulSet", "db", "ss-uid"))],
                     {"StatefulSet/db": workload(replicas=6, uid="ss-uid")}, None,
                     6, id="statefulset replicas"),
        pytest.param([pod("a", owner=("Job", "j", "job-uid"))],
                     {"Job/j": workload(uid="job-uid", parallelism=8)}, None,
                     8, id="job parallelism"),
        pytest.param([pod("a", owner=("Job", "j", "job-uid"))],
                     {"Job/j": workload(uid="job-uid", parallelism=8, completions=10)}, None,
                     8, id="job parallelism below completions"),
        pytest.param([pod("a", owner=("Job", "j", "job-uid"))],
                     {"Job/j": workload(uid="job-uid", parallelism=8, completions=10,
                                        succeeded=7)}, None,
                     3, id="job: only the completions still missing"),
        pytest.param([pod("a", owner=None), pod("b", owner=None)], {}, None,
                     2, id="bare pods count one each"),
        pytest.param([pod("a", owner=("DaemonSet", "ds", "ds-uid"))], {}, None,
                     undeclared(pod("a"), "DaemonSet", "ds"),
                     id="a kind cdo cannot size: the size must be declared"),
        pytest.param([pod("a", owner=("DaemonSet", "ds", "ds-uid"))], {}, 6,
                     6, id="a declared size serves any kind"),
        pytest.param([pod("a", owner=RS)], {}, None,
                     "waiting to see ReplicaSet train-rs", id="workload not cached yet"),
        pytest.param([pod("a", owner=RS)], {"ReplicaSet/train-rs": workload(replicas=3,
                                                                           uid="other")}, None,
                     "waiting to see ReplicaSet train-rs", id="a namesake is not the owner"),
        pytest.param([], {}, None, 0, id="no pods"),
    ],
)  # fmt: skip
def test_gang_size(
    pods: list[Pod], found: dict[str, Workload], explicit: int | None, expected: int | str
) -> None:
    assert size(pods, explicit, **found) == expected


def test_unknown_size_names_the_workload() -> None:
    result = gang_size(explicit=None, pods=[pod("a", owner=RS)], workload=lambda *_: None)
    assert isinstance(result, UnknownSize)


@pytest.mark.parametrize(
    ("gpus", "expected"),
    [
        ([4, 4, 4], GpuCount(gpus=4)),
        ([1], GpuCount(gpus=1)),
        ([2, 4], GpuMismatch(message="the domain's pods ask for different GPU counts (2, 4); "
                                     "one gang takes one size")),
    ],
)  # fmt: skip
def test_gpus_per_pod(gpus: list[int], expected: GpuCount | GpuMismatch) -> None:
    pods = [pod(f"p{i}", gpus=count) for i, count in enumerate(gpus)]
    assert gpus_per_pod(pods) == expected


def test_no_pods_no_gpu_count() -> None:
    assert gpus_per_pod([]) is None
