"""Kubernetes Events only for transitions."""

from __future__ import annotations

from services.domain_controller.notices import notices
from services.domain_controller.status import compute_status
from shared.crds.computedomain import ComputeDomainStatus

from .builders import NODES_OK, NOW, facts, node, pod


def status_of(**changes: object) -> ComputeDomainStatus:
    return compute_status(facts(**changes), previous=ComputeDomainStatus(), now=NOW).status


def reasons(old: ComputeDomainStatus, new: ComputeDomainStatus) -> list[str]:
    return [f"{n.type}/{n.reason}" for n in notices(old, new)]


def test_first_status_of_a_ready_domain() -> None:
    assert reasons(ComputeDomainStatus(), status_of()) == ["Normal/Placed", "Normal/Ready"]


def test_steady_state_says_nothing() -> None:
    assert reasons(status_of(), status_of()) == []


def test_degradation_and_recovery() -> None:
    faulty = status_of(
        nodes={**NODES_OK, "n1": node("n1", faults=("cdo.dev/gpu-fault=x:NoExecute",))}
    )
    assert reasons(status_of(), faulty) == ["Warning/NotReady", "Warning/Degraded"]
    assert reasons(faulty, status_of()) == ["Normal/Ready", "Normal/Recovered"]


def test_a_pod_stopping_is_not_a_degradation() -> None:
    stopped = status_of(pods=(pod("p1", "n1", "Failed"),))
    assert reasons(status_of(), stopped) == ["Warning/NotReady"]


def test_conflict_and_deletion_steps() -> None:
    conflict = status_of(placement=None, pods=(), nodes={}, template_conflict="taken")
    assert "Warning/TemplateNameConflict" in reasons(ComputeDomainStatus(), conflict)
    deleting = status_of(deleting=True)
    assert "Normal/WaitingForPods" in reasons(status_of(), deleting)
    assert reasons(deleting, deleting) == []
