"""ReplicaSet desired state: how many pods to create, which to delete, what status says."""

from __future__ import annotations

from shared.kube.resources import REPLICA_SETS
from sim.controllers.expectations import Outstanding, PendingCreate
from sim.controllers.objects import controller_reference
from sim.controllers.pods import deletion_order, is_available, next_availability
from sim.controllers.replicaset import plan_replicas, pods_for, replica_set_status
from tests.unit.controllers.builders import NOW, pod, replica_set

NOTHING = Outstanding()


def names(pods: object) -> list[str]:
    return [p.metadata.name for p in pods]  # type: ignore[attr-defined]


def pending(*names: str) -> Outstanding:
    return Outstanding(
        creates=tuple(PendingCreate(name=n, resource_version=1, tag="", expires=1e9) for n in names)
    )


def test_creates_the_missing_pods() -> None:
    plan = plan_replicas(replicas=5, pods=[pod("a"), pod("b")], outstanding=NOTHING, burst=500)
    assert plan.create == 3
    assert plan.delete == ()


def test_burst_caps_one_reconcile() -> None:
    assert plan_replicas(replicas=900, pods=[], outstanding=NOTHING, burst=500).create == 500


def test_finished_and_terminating_pods_do_not_count_and_are_replaced() -> None:
    pods = [
        pod("ok", phase="Running"),
        pod("failed", phase="Failed"),
        pod("done", phase="Succeeded"),
        pod("leaving", phase="Running", deleting=True),
    ]
    plan = plan_replicas(replicas=4, pods=pods, outstanding=NOTHING, burst=500)
    assert plan.create == 3


def test_outstanding_creates_count_as_present() -> None:
    plan = plan_replicas(replicas=3, pods=[pod("a")], outstanding=pending("b", "c"), burst=500)
    assert plan.create == 0
    assert plan.delete == ()


def test_outstanding_deletes_count_as_gone() -> None:
    pods = [pod("a"), pod("b"), pod("c")]
    gone = Outstanding(deletes=frozenset({"uid-c"}))
    assert plan_replicas(replicas=2, pods=pods, outstanding=gone, burst=500).delete == ()
    assert plan_replicas(replicas=3, pods=pods, outstanding=gone, burst=500).create == 1


def test_scale_down_deletes_in_the_documented_order() -> None:
    pods = [
        pod("old-ready", phase="Running", node="n1", ready_for=500, age=900),
        pod("new-ready", phase="Running", node="n1", ready_for=5, age=10),
        pod("running-not-ready", phase="Running", node="n1", age=800),
        pod("pending-bound", phase="Pending", node="n2", age=700),
        pod("unscheduled", phase="Pending", age=600),
    ]
    plan = plan_replicas(replicas=1, pods=pods, outstanding=NOTHING, burst=500)
    assert names(plan.delete) == [
        "unscheduled",
        "pending-bound",
        "running-not-ready",
        "new-ready",
    ]


def test_newer_pods_go_first_among_equals() -> None:
    pods = [pod("older", age=50), pod("newer", age=5), pod("oldest", age=500)]
    assert names(deletion_order(pods)) == ["newer", "older", "oldest"]


def test_status_counts_active_ready_available_and_labels() -> None:
    rs = replica_set("web-1", replicas=4, min_ready=30)
    pods = [
        pod("a", phase="Running", ready_for=60),
        pod("b", phase="Running", ready_for=10),
        pod("c", phase="Running", labels={"other": "x"}),
        pod("d", phase="Failed", ready_for=60),
        pod("e", phase="Running", ready_for=60, deleting=True),
    ]
    status = replica_set_status(rs, pods, now=NOW, failure=None)
    assert (status.replicas, status.ready_replicas, status.available_replicas) == (3, 2, 1)
    assert status.fully_labeled_replicas == 2
    assert status.observed_generation == 1
    assert next_availability(pods[:3], min_ready_seconds=30, now=NOW) == 20.0


def test_availability_needs_min_ready_seconds() -> None:
    assert is_available(pod("a", ready_for=0), min_ready_seconds=0, now=NOW)
    assert not is_available(pod("a", ready_for=5), min_ready_seconds=10, now=NOW)
    assert not is_available(pod("a"), min_ready_seconds=0, now=NOW)


def test_replica_failure_condition_comes_and_goes() -> None:
    rs = replica_set("web-1", replicas=2)
    failing = replica_set_status(rs, [], now=NOW, failure=("FailedCreate", "denied"))
    [cond] = failing.conditions
    assert (cond.type, cond.status, cond.reason, cond.message) == (
        "ReplicaFailure",
        "True",
        "FailedCreate",
        "denied",
    )
    healed = replica_set(
        "web-1", replicas=2, conditions=[{"type": "ReplicaFailure", "status": "True"}]
    )
    assert replica_set_status(healed, [], now=NOW, failure=None).conditions == ()


def test_pods_are_made_from_the_template_with_a_controller_reference() -> None:
    rs = replica_set("web-1", replicas=2)
    [made] = pods_for(rs, 1)
    body = made.body
    assert body["metadata"]["generateName"] == "web-1-"
    assert body["metadata"]["labels"] == {"app": "a"}
    assert body["metadata"]["ownerReferences"] == [controller_reference(REPLICA_SETS, rs)]
    assert body["spec"] == rs.spec.template["spec"]
    assert body["spec"] is not rs.spec.template["spec"]
