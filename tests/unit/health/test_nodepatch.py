"""The Node writes, as pure diffs: labels, the taint list, the condition."""

from __future__ import annotations

from datetime import UTC, datetime

from services.health_monitor.faults import Reaction
from services.health_monitor.nodepatch import (
    condition_patch,
    desired_taints,
    label_patch,
    taint_patch,
)
from services.health_monitor.state import ConditionState
from shared.crds.names import (
    CLIQUE_LABEL,
    GPU_FAULT_TAINT,
    GPU_HEALTHY_CONDITION,
    NVLINK_DOMAIN_LABEL,
)
from shared.kube.models import Condition, Taint

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
EARLIER = datetime(2026, 1, 1, 0, 0, 0, tzinfo=UTC)
UNREACHABLE = Taint(key="node.kubernetes.io/unreachable", effect="NoExecute", time_added=EARLIER)
MAINTENANCE = Taint(key="example.com/maintenance", value="planned", effect="NoSchedule")
OURS_FATAL = Taint(key=GPU_FAULT_TAINT, value="fatal", effect="NoExecute", time_added=EARLIER)
OURS_WARNING = Taint(key=GPU_FAULT_TAINT, value="warning", effect="NoSchedule")
FATAL_BODY = {
    "key": GPU_FAULT_TAINT,
    "effect": "NoExecute",
    "value": "fatal",
    "timeAdded": "2026-01-02T03:04:05Z",
}


def test_labels_are_set_and_removed_only_where_they_differ() -> None:
    current = {"kubernetes.io/hostname": "n1", CLIQUE_LABEL: "a.1", NVLINK_DOMAIN_LABEL: "a"}
    assert label_patch(current, {CLIQUE_LABEL: "a.1", NVLINK_DOMAIN_LABEL: "a"}) is None
    assert label_patch(current, {CLIQUE_LABEL: "a.2", NVLINK_DOMAIN_LABEL: "a"}) == {
        "metadata": {"labels": {CLIQUE_LABEL: "a.2"}}
    }
    assert label_patch(current, {CLIQUE_LABEL: None, NVLINK_DOMAIN_LABEL: None}) == {
        "metadata": {"labels": {CLIQUE_LABEL: None, NVLINK_DOMAIN_LABEL: None}}
    }
    assert label_patch({}, {CLIQUE_LABEL: None}) is None
    assert label_patch(current, {}) is None


def test_adding_the_taint_keeps_other_taints_in_order() -> None:
    taints = desired_taints([UNREACHABLE, MAINTENANCE], Reaction.NO_EXECUTE, now=NOW)
    assert taints == [
        {"key": UNREACHABLE.key, "effect": "NoExecute", "timeAdded": "2026-01-01T00:00:00Z"},
        {"key": MAINTENANCE.key, "effect": "NoSchedule", "value": "planned"},
        {
            "key": GPU_FAULT_TAINT,
            "effect": "NoExecute",
            "value": "fatal",
            "timeAdded": "2026-01-02T03:04:05Z",
        },
    ]


def test_a_taint_already_right_is_not_written() -> None:
    assert desired_taints([MAINTENANCE, OURS_FATAL], Reaction.NO_EXECUTE, now=NOW) is None
    assert desired_taints([OURS_WARNING], Reaction.NO_SCHEDULE, now=NOW) is None
    assert desired_taints([MAINTENANCE], Reaction.NONE, now=NOW) is None


def test_changing_and_removing_the_taint() -> None:
    assert desired_taints([OURS_WARNING, MAINTENANCE], Reaction.NO_EXECUTE, now=NOW) == [
        {"key": MAINTENANCE.key, "effect": "NoSchedule", "value": "planned"},
        {
            "key": GPU_FAULT_TAINT,
            "effect": "NoExecute",
            "value": "fatal",
            "timeAdded": "2026-01-02T03:04:05Z",
        },
    ]
    assert desired_taints([OURS_FATAL, MAINTENANCE], Reaction.NO_SCHEDULE, now=NOW) == [
        {"key": MAINTENANCE.key, "effect": "NoSchedule", "value": "planned"},
        {"key": GPU_FAULT_TAINT, "effect": "NoSchedule", "value": "warning"},
    ]
    assert desired_taints([MAINTENANCE, OURS_FATAL], Reaction.NONE, now=NOW) == [
        {"key": MAINTENANCE.key, "effect": "NoSchedule", "value": "planned"}
    ]
    assert desired_taints([OURS_FATAL], Reaction.NONE, now=NOW) == []


def test_duplicate_fault_taints_are_collapsed_to_one() -> None:
    assert desired_taints([OURS_WARNING, OURS_FATAL], Reaction.NO_EXECUTE, now=NOW) == [
        {
            "key": GPU_FAULT_TAINT,
            "effect": "NoExecute",
            "value": "fatal",
            "timeAdded": "2026-01-02T03:04:05Z",
        },
    ]


def test_the_taint_patch_carries_the_version_it_was_computed_from() -> None:
    patch = taint_patch([], Reaction.NO_SCHEDULE, resource_version="42", now=NOW)
    assert patch == {
        "metadata": {"resourceVersion": "42"},
        "spec": {"taints": [{"key": GPU_FAULT_TAINT, "effect": "NoSchedule", "value": "warning"}]},
    }
    assert taint_patch([], Reaction.NONE, resource_version="42", now=NOW) is None


def condition(status: str, reason: str, message: str = "m") -> Condition:
    return Condition(
        type=GPU_HEALTHY_CONDITION,
        status=status,
        reason=reason,
        message=message,
        last_transition_time=EARLIER,
    )


def test_condition_unchanged_is_not_written() -> None:
    desired = ConditionState(status="True", reason="GpuHealthy", message="m")
    assert condition_patch(condition("True", "GpuHealthy"), desired, now=NOW) is None


def test_condition_transition_time_moves_only_with_the_status() -> None:
    warning = ConditionState(status="True", reason="GpuWarning", message="w")
    patch = condition_patch(condition("True", "GpuHealthy"), warning, now=NOW)
    assert patch is not None
    (entry,) = patch["status"]["conditions"]
    assert entry["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert entry["lastHeartbeatTime"] == "2026-01-02T03:04:05Z"

    fault = ConditionState(status="False", reason="GpuFault", message="f")
    patch = condition_patch(condition("True", "GpuHealthy"), fault, now=NOW)
    assert patch is not None
    (entry,) = patch["status"]["conditions"]
    assert entry == {
        "type": GPU_HEALTHY_CONDITION,
        "status": "False",
        "reason": "GpuFault",
        "message": "f",
        "lastTransitionTime": "2026-01-02T03:04:05Z",
        "lastHeartbeatTime": "2026-01-02T03:04:05Z",
    }
    assert condition_patch(None, fault, now=NOW) == patch
