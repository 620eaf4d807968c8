"""Status writes and conditions shared by the workload controllers."""

from __future__ import annotations

from datetime import timedelta

from sim.controllers.objects import (
    ReplicaSetStatus,
    WorkloadCondition,
    set_condition,
    status_patch,
)
from tests.unit.controllers.builders import NOW

READY = WorkloadCondition(type="Ready", status="True", reason="Fine", message="ok")


def test_status_patch_writes_values_and_nulls_defaults() -> None:
    patch = status_patch(ReplicaSetStatus(replicas=3, observed_generation=2))
    assert patch == {
        "status": {
            "replicas": 3,
            "fullyLabeledReplicas": None,
            "readyReplicas": None,
            "availableReplicas": None,
            "observedGeneration": 2,
            "conditions": None,
        }
    }


def test_set_condition_stamps_new_conditions() -> None:
    [cond] = set_condition((), READY, now=NOW, update_time=True)
    assert cond.last_transition_time == "2030-01-01T12:00:00Z"
    assert cond.last_update_time == "2030-01-01T12:00:00Z"
    assert cond.last_probe_time is None


def test_set_condition_keeps_times_while_nothing_changes() -> None:
    first = set_condition((), READY, now=NOW)
    assert set_condition(first, READY, now=NOW + timedelta(hours=1)) == first


def test_transition_time_moves_only_with_the_status() -> None:
    first = set_condition((), READY, now=NOW, update_time=True)
    later = NOW + timedelta(hours=1)
    reworded = WorkloadCondition(type="Ready", status="True", reason="Fine", message="still ok")
    [cond] = set_condition(first, reworded, now=later, update_time=True)
    assert cond.last_transition_time == "2030-01-01T12:00:00Z"
    assert cond.last_update_time == "2030-01-01T13:00:00Z"
    flipped = WorkloadCondition(type="Ready", status="False", reason="Bad")
    [cond] = set_condition(first, flipped, now=later)
    assert cond.last_transition_time == "2030-01-01T13:00:00Z"


def test_other_conditions_keep_their_place() -> None:
    other = WorkloadCondition(type="Other", status="True")
    conditions = set_condition((other,), READY, now=NOW)
    assert [c.type for c in conditions] == ["Other", "Ready"]
