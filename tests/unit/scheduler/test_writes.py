"""The bodies the scheduler sends."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec

from sim.scheduler.objects import AllocationResult
from sim.scheduler.writes import (
    UNSCHEDULABLE_REASON,
    binding,
    claim_release_patch,
    claim_status_patch,
    not_scheduled_patch,
    reserved,
)
from tests.unit.scheduler.builders import DRIVER, exactly, facts, make_claim, make_pod

ALLOCATION = msgspec.convert(
    {
        "devices": {
            "results": [{"request": "slot", "driver": DRIVER, "pool": "n1", "device": "slot-0"}]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
            ]
        },
    },
    AllocationResult,
)


def test_binding() -> None:
    assert binding(facts(make_pod("p")), "n1") == {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p", "namespace": "default", "uid": "uid-p"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
    }


def test_unschedulable_condition() -> None:
    now = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    patch = not_scheduled_patch(UNSCHEDULABLE_REASON, "why", now=now)
    assert patch["status"]["conditions"] == [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "why",
            "lastProbeTime": None,
            "lastTransitionTime": "2025-01-02T03:04:05Z",
        }
    ]


def test_allocating_and_reserving_a_claim() -> None:
    claim = make_claim("c", requests=[exactly("slot", "x")], resource_version="9")
    pod = facts(make_pod("p"))
    updated = reserved(claim, pod, ALLOCATION)
    assert reserved(updated, pod, None) == updated  # reserving twice changes nothing
    assert claim_status_patch(updated, base_version="9") == {
        "metadata": {"resourceVersion": "9"},
        "status": {
            "reservedFor": [{"resource": "pods", "name": "p", "uid": "uid-p"}],
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "slot", "driver": DRIVER, "pool": "n1", "device": "slot-0"}
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["n1"]}
                            ]
                        }
                    ]
                },
            },
        },
    }


def test_undoing_a_reservation() -> None:
    pod = facts(make_pod("p"))
    other = facts(make_pod("q"))
    claim = reserved(
        reserved(make_claim("c", requests=[], resource_version="3"), other, ALLOCATION),
        pod,
        None,
    )
    assert claim_release_patch(claim, pod_uid="uid-p", deallocate=True) == {
        "metadata": {"resourceVersion": "3"},
        "status": {"reservedFor": [{"resource": "pods", "name": "q", "uid": "uid-q"}]},
    }
    alone = reserved(make_claim("c", requests=[], resource_version="4"), pod, ALLOCATION)
    assert claim_release_patch(alone, pod_uid="uid-p", deallocate=True) == {
        "metadata": {"resourceVersion": "4"},
        "status": {"reservedFor": None, "allocation": None},
    }
    assert claim_release_patch(alone, pod_uid="uid-x", deallocate=False) is None
