"""Deployment decisions: naming, which ReplicaSet is new, rollout steps, status."""

from __future__ import annotations

import msgspec
import pytest

from sim.controllers.objects import POD_TEMPLATE_HASH_LABEL, condition
from sim.controllers.rollout import (
    RolloutPlan,
    deployment_status,
    history_to_delete,
    recreate_plan,
    replica_set_body,
    rolling_plan,
    split,
    surge_and_unavailable,
    template_hash,
)
from tests.unit.controllers.builders import NOW, deployment, replica_set, template


def with_hash(tmpl: dict[str, object], value: str) -> dict[str, object]:
    labels = dict(tmpl["metadata"]["labels"])  # type: ignore[index]
    labels[POD_TEMPLATE_HASH_LABEL] = value
    return {**tmpl, "metadata": {"labels": labels}}


def test_hash_is_stable_safe_and_changes_with_template_and_collisions() -> None:
    first = template_hash(template(), None)
    assert first == template_hash(template(), None)
    assert first == template_hash(template(), 0)
    assert set(first) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert 1 <= len(first) <= 10
    assert template_hash(template(app="b"), None) != first
    assert template_hash(template(), 1) != first


def test_new_replica_set_is_the_one_with_the_template_ignoring_the_hash() -> None:
    d = deployment(replicas=3)
    old = replica_set("web-old", replicas=1, tmpl=with_hash(template(app="v1"), "x"), age=500)
    current = replica_set("web-new", replicas=1, tmpl=with_hash(template(), "y"), age=10)
    new, olds = split(d, [current, old])
    assert new is current
    assert olds == [old]


def test_replica_set_body_carries_the_hash_everywhere() -> None:
    d = deployment(replicas=3)
    body = replica_set_body(d, pod_hash="abc", replicas=2, revision=4)
    meta = body["metadata"]
    assert meta["name"] == "web-abc"
    assert meta["labels"] == {"app": "a", POD_TEMPLATE_HASH_LABEL: "abc"}
    assert meta["annotations"] == {"deployment.kubernetes.io/revision": "4"}
    assert meta["ownerReferences"][0]["kind"] == "Deployment"
    assert meta["ownerReferences"][0]["controller"] is True
    assert body["spec"]["selector"]["matchLabels"] == {"app": "a", POD_TEMPLATE_HASH_LABEL: "abc"}
    assert body["spec"]["template"]["metadata"]["labels"][POD_TEMPLATE_HASH_LABEL] == "abc"
    assert POD_TEMPLATE_HASH_LABEL not in d.spec.template["metadata"]["labels"]


@pytest.mark.parametrize(
    ("replicas", "surge", "unavailable", "expected"),
    [
        (18, "25%", "25%", (5, 4)),
        (10, "25%", "25%", (3, 2)),
        (4, 0, 0, (0, 1)),
        (3, 1, 5, (1, 3)),
        (1, "25%", "25%", (1, 0)),
    ],
)
def test_surge_rounds_up_and_unavailable_down(
    replicas: int, surge: int | str, unavailable: int | str, expected: tuple[int, int]
) -> None:
    d = deployment(replicas=replicas, surge=surge, unavailable=unavailable)
    assert surge_and_unavailable(d) == expected


def test_first_rollout_creates_the_new_replica_set_at_full_size() -> None:
    plan = rolling_plan(deployment(replicas=18), None, [])
    assert plan == RolloutPlan(new_replicas=18)


def test_scaling_moves_only_the_new_replica_set() -> None:
    d = deployment(replicas=9)
    new = replica_set("web-new", replicas=18, available=18)
    assert rolling_plan(d, new, []) == RolloutPlan(new_replicas=9)
    d = deployment(replicas=18)
    new = replica_set("web-new", replicas=9, available=9)
    assert rolling_plan(d, new, []) == RolloutPlan(new_replicas=18)


def test_a_template_change_surges_the_new_and_keeps_availability() -> None:
    d = deployment(replicas=10, surge=2, unavailable=1)
    old = replica_set("web-old", replicas=10, available=10)
    # First step: the new ReplicaSet is created with the surge; the old one may lose one pod.
    plan = rolling_plan(d, None, [old])
    assert plan == RolloutPlan(new_replicas=2, old_replicas={"web-old": 9})


def test_old_unavailable_pods_go_first_and_available_ones_respect_the_floor() -> None:
    d = deployment(replicas=10, surge=0, unavailable=2)
    new = replica_set("web-new", replicas=2, available=2, age=10)
    old = replica_set("web-old", replicas=8, available=5, age=100)
    # 3 old pods are unavailable: those go first (within the budget of 10 - 8 - 0 = 2),
    # then available ones while available pods stay >= 8: 7 available, so none.
    plan = rolling_plan(d, new, [old])
    assert plan == RolloutPlan(new_replicas=2, old_replicas={"web-old": 6})


def test_rollout_does_nothing_when_surge_and_floor_are_used_up() -> None:
    d = deployment(replicas=4, surge=1, unavailable=0)
    new = replica_set("web-new", replicas=1, available=0, age=10)
    old = replica_set("web-old", replicas=4, available=4, age=100)
    assert rolling_plan(d, new, [old]) == RolloutPlan(new_replicas=1)


def test_rollout_finishes_by_emptying_old_replica_sets() -> None:
    d = deployment(replicas=4, surge=1, unavailable=0)
    new = replica_set("web-new", replicas=4, available=4, age=10)
    old = replica_set("web-old", replicas=1, available=1, age=100)
    assert rolling_plan(d, new, [old]) == RolloutPlan(new_replicas=4, old_replicas={"web-old": 0})


def test_recreate_scales_old_down_then_waits_then_creates() -> None:
    d = deployment(replicas=3, strategy="Recreate")
    old = replica_set("web-old", replicas=3, available=3)
    assert recreate_plan(d, None, [old], old_pods_running=True) == RolloutPlan(
        old_replicas={"web-old": 0}
    )
    emptied = replica_set("web-old", replicas=0)
    assert recreate_plan(d, None, [emptied], old_pods_running=True) == RolloutPlan()
    assert recreate_plan(d, None, [emptied], old_pods_running=False) == RolloutPlan(new_replicas=3)


def test_history_keeps_the_limit_of_empty_old_replica_sets() -> None:
    d = deployment(replicas=1, history=1)
    old = [
        replica_set("r1", replicas=0, revision=1),
        replica_set("r2", replicas=0, revision=2),
        replica_set("r3", replicas=0, revision=3),
        replica_set("busy", replicas=1, revision=0),
        replica_set("draining", replicas=0, status_replicas=1, revision=0),
    ]
    assert [rs.metadata.name for rs in history_to_delete(d, old)] == ["r1", "r2"]
    assert history_to_delete(deployment(replicas=1, history=None), old) == []


def test_status_sums_replica_sets_and_reports_progress() -> None:
    d = deployment(replicas=4)
    new = replica_set("web-new", replicas=4, available=4)
    status = deployment_status(d, new, [new], now=NOW, collision_count=None)
    assert (status.replicas, status.updated_replicas, status.available_replicas) == (4, 4, 4)
    assert (status.ready_replicas, status.unavailable_replicas) == (4, 0)
    assert status.observed_generation == 3
    available = condition(status.conditions, "Available")
    progressing = condition(status.conditions, "Progressing")
    assert available is not None and available.status == "True"
    assert progressing is not None and progressing.reason == "NewReplicaSetAvailable"
    assert progressing.message == 'ReplicaSet "web-new" has successfully progressed.'


def test_status_during_a_rollout() -> None:
    d = deployment(replicas=4, surge=1, unavailable=0)
    new = replica_set("web-new", replicas=1, available=0, status_replicas=1)
    old = replica_set("web-old", replicas=4, available=4)
    status = deployment_status(d, new, [new, old], now=NOW, collision_count=2)
    assert (status.replicas, status.updated_replicas, status.unavailable_replicas) == (5, 1, 1)
    assert status.collision_count == 2
    progressing = condition(status.conditions, "Progressing")
    assert progressing is not None and progressing.reason == "ReplicaSetUpdated"
    available = condition(status.conditions, "Available")
    assert available is not None and available.status == "True"


def test_unchanged_status_keeps_its_condition_times() -> None:
    d = deployment(replicas=2)
    new = replica_set("web-new", replicas=2, available=2)
    first = deployment_status(d, new, [new], now=NOW, collision_count=None)
    again_d = deployment(
        replicas=2,
        status={"conditions": msgspec.to_builtins(first.conditions)},
    )
    later = NOW.replace(hour=13)
    second = deployment_status(again_d, new, [new], now=later, collision_count=None)
    assert second.conditions == first.conditions


def test_missing_minimum_availability_is_reported() -> None:
    d = deployment(replicas=4, strategy="Recreate")
    new = replica_set("web-new", replicas=4, available=3)
    status = deployment_status(d, new, [new], now=NOW, collision_count=None)
    available = condition(status.conditions, "Available")
    assert available is not None
    assert (available.status, available.reason) == ("False", "MinimumReplicasUnavailable")
