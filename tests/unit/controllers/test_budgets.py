"""A PodDisruptionBudget's status from its pods (sim.controllers.budgets), case by case."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import msgspec
import pytest

from shared.kube.meta import OwnerReference
from sim.controllers.budgets import (
    DELETION_TIMEOUT,
    Budget,
    budget_status,
    same_status,
    scaled,
    selects,
)
from tests.unit.controllers.builders import NOW, owner_ref, pod, stamp

RS = owner_ref("ReplicaSet", "web-1", "rs-1", "apps/v1")
OTHER_RS = owner_ref("ReplicaSet", "web-2", "rs-2", "apps/v1")


def budget(spec: dict[str, Any], *, disrupted: dict[str, str] | None = None) -> Budget:
    body = {
        "metadata": {"name": "b", "namespace": "ns", "generation": 3},
        "spec": {"selector": {"matchLabels": {"app": "a"}}, **spec},
        "status": {"disruptedPods": disrupted or {}},
    }
    return msgspec.convert(body, Budget)


def scales(**replicas: int) -> Any:
    """Controllers by uid: each scales as itself with ``replicas``."""

    def scale_of(ref: OwnerReference, _namespace: str) -> tuple[str, int] | None:
        uid = ref.uid.replace("-", "_")
        return (ref.uid, replicas[uid]) if uid in replicas else None

    return scale_of


def ready(name: str, owner: dict[str, Any] | None = RS, **kw: Any) -> Any:
    return pod(name, phase="Running", ready_for=10, owner=owner, **kw)


@pytest.mark.parametrize(
    ("spec", "expected", "desired", "allowed"),
    [
        pytest.param({"minAvailable": 2}, 3, 2, 1, id="int minAvailable counts the pods"),
        pytest.param({"minAvailable": "50%"}, 4, 2, 1, id="percent of the scale, rounded up"),
        pytest.param({"minAvailable": "30%"}, 4, 2, 1, id="30% of 4 rounds up to 2"),
        pytest.param({"maxUnavailable": 1}, 4, 3, 0, id="maxUnavailable of the scale"),
        pytest.param({"maxUnavailable": "50%"}, 4, 2, 1, id="maxUnavailable percent"),
        pytest.param({"maxUnavailable": 9}, 4, 0, 3, id="never below 0 desired"),
        pytest.param({"minAvailable": 5}, 3, 5, 0, id="never a negative allowance"),
    ],
)
def test_counts_follow_the_spec(
    spec: dict[str, Any], expected: int, desired: int, allowed: int
) -> None:
    pods = [ready("p1"), ready("p2"), ready("p3")]  # the ReplicaSet wants 4

    status, _ = budget_status(budget(spec), pods, scales(rs_1=4), now=NOW)

    assert (status.expected_pods, status.desired_healthy, status.disruptions_allowed) == (
        expected,
        desired,
        allowed,
    )
    assert status.current_healthy == 3
    assert status.observed_generation == 3


def test_only_ready_pods_not_being_deleted_nor_evicted_are_healthy() -> None:
    pods = [
        ready("ok"),
        pod("starting", phase="Running", owner=RS),
        ready("leaving", deleting=True),
        ready("evicted"),
    ]
    recorded = {"evicted": stamp(5), "gone": stamp(5)}

    status, recheck = budget_status(
        budget({"minAvailable": 1}, disrupted=recorded), pods, scales(rs_1=4), now=NOW
    )

    assert status.current_healthy == 1
    assert status.disrupted_pods == {"evicted": stamp(5)}  # the gone pod's entry is dropped
    assert recheck == NOW - timedelta(seconds=5) + DELETION_TIMEOUT


def test_an_eviction_that_never_happened_counts_again_after_the_timeout() -> None:
    late = int(DELETION_TIMEOUT.total_seconds()) + 1
    status, recheck = budget_status(
        budget({"minAvailable": 1}, disrupted={"p1": stamp(late)}),
        [ready("p1")],
        scales(rs_1=1),
        now=NOW,
    )
    assert (status.disrupted_pods, status.current_healthy, recheck) == ({}, 1, None)


def test_no_expected_pod_allows_no_disruption() -> None:
    status, _ = budget_status(budget({"maxUnavailable": 1}), [], scales(), now=NOW)
    assert (status.expected_pods, status.disruptions_allowed) == (0, 0)
    (condition,) = status.conditions
    assert (condition["status"], condition["reason"]) == ("False", "InsufficientPods")


def test_distinct_controllers_add_up_and_pods_without_one_are_left_out() -> None:
    pods = [ready("a1"), ready("a2", owner=OTHER_RS), ready("loose", owner=None)]

    status, _ = budget_status(budget({"maxUnavailable": 0}), pods, scales(rs_1=2, rs_2=3), now=NOW)

    assert status.expected_pods == 5
    (condition,) = status.conditions
    assert (condition["status"], condition["reason"]) == ("False", "InsufficientPods")


def test_a_controller_without_scale_fails_the_sync() -> None:
    job = owner_ref("Job", "batch", "job-1", "batch/v1")

    status, _ = budget_status(
        budget({"maxUnavailable": 1}), [ready("batch-x", owner=job)], scales(), now=NOW
    )

    assert status.disruptions_allowed == 0
    (condition,) = status.conditions
    assert condition["reason"] == "SyncFailed"
    assert condition["message"] == 'found no controllers for pod "batch-x"'


def test_sufficient_pods_condition() -> None:
    status, _ = budget_status(
        budget({"minAvailable": 1}), [ready("a"), ready("b")], scales(), now=NOW
    )
    (condition,) = status.conditions
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "DisruptionAllowed",
        "True",
        "SufficientPods",
    )
    assert condition["observedGeneration"] == 3


def test_selection_is_by_namespace_and_selector() -> None:
    covered = budget({})
    assert selects(covered, pod("p"))
    assert not selects(covered, pod("p", labels={"app": "other"}))
    everything = budget({"selector": {}})
    assert selects(everything, pod("p", labels={}))
    nothing = msgspec.convert({"metadata": {"namespace": "ns"}, "spec": {}}, Budget)
    assert not selects(nothing, pod("p"))


def test_a_status_that_differs_only_in_transition_times_is_the_same() -> None:
    status, _ = budget_status(budget({"minAvailable": 1}), [ready("a")], scales(), now=NOW)
    stamped = msgspec.structs.replace(
        status,
        conditions=tuple({**c, "lastTransitionTime": stamp(60)} for c in status.conditions),
    )
    assert same_status(stamped, status)
    assert not same_status(msgspec.structs.replace(status, current_healthy=9), status)


def test_scaled_rounds_percentages_up() -> None:
    assert (scaled(3, 10), scaled("25%", 10), scaled("0%", 10), scaled("100%", 3)) == (3, 3, 0, 3)
