"""The domain gauges read back, from recorded statuses, the phase the controller computed."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import msgspec
import pytest

from services.domain_controller.gauges import DomainGauges, longest_degraded_s, phase_of
from services.domain_controller.status import compute_status
from shared.crds.computedomain import ComputeDomain, ComputeDomainStatus
from shared.metrics import Metrics
from tests.unit.domain_controller.builders import NODES_OK, NOW, facts, node, pod

SITUATIONS = {
    "Pending": facts(placement=None, pods=()),
    "Placed": facts(pods=(pod("p1", "n1", phase="Pending"),)),
    "Ready": facts(),
    "Degraded": facts(nodes={**NODES_OK, "n2": node("n2", imex="False", imex_reason="NotReady")}),
    "NotReady": facts(template_conflict="the template belongs to another domain"),
    "Deleting": facts(deleting=True),
}


def domain(status: ComputeDomainStatus, *, deleting: bool = False, name: str = "d") -> Any:
    metadata: dict[str, Any] = {"name": name, "namespace": "ml", "uid": name}
    if deleting:
        metadata["deletionTimestamp"] = "2026-05-01T12:00:00Z"
    body = {
        "metadata": metadata,
        "spec": {"channel": {"resourceClaimTemplate": {"name": f"{name}-channel"}}},
        "status": msgspec.to_builtins(status),
    }
    return msgspec.convert(body, ComputeDomain, from_attributes=False)


@pytest.mark.parametrize("phase", sorted(SITUATIONS))
def test_the_phase_read_back_is_the_one_computed(phase: str) -> None:
    situation = SITUATIONS[phase]
    assessment = compute_status(situation, previous=ComputeDomainStatus(), now=NOW)
    assert assessment.phase == phase
    recorded = domain(assessment.status, deleting=situation.deleting)
    assert phase_of(recorded) == phase


def test_a_domain_never_reconciled_is_pending() -> None:
    assert phase_of(domain(ComputeDomainStatus())) == "Pending"


def test_the_longest_degraded_domain_counts() -> None:
    degraded = compute_status(SITUATIONS["Degraded"], previous=ComputeDomainStatus(), now=NOW)
    later = compute_status(
        SITUATIONS["Degraded"], previous=ComputeDomainStatus(), now=NOW + timedelta(minutes=5)
    )
    healthy = compute_status(SITUATIONS["Ready"], previous=ComputeDomainStatus(), now=NOW)
    domains = [
        domain(later.status, name="b"),
        domain(degraded.status, name="a"),
        domain(healthy.status, name="c"),
        domain(degraded.status, name="gone", deleting=True),
    ]
    assert longest_degraded_s(domains, now=NOW + timedelta(minutes=10)) == 600
    assert longest_degraded_s([domains[2]], now=NOW) == 0


def test_the_gauges_are_read_when_scraped() -> None:
    metrics = Metrics()
    domains: list[ComputeDomain] = []
    metrics.registry.register(
        DomainGauges(lambda: domains, now=lambda: NOW + timedelta(seconds=90))
    )
    registry = metrics.registry
    assert registry.get_sample_value("cdo_domains", {"phase": "Degraded"}) == 0
    for phase in ("Degraded", "Ready", "Ready"):
        status = compute_status(SITUATIONS[phase], previous=ComputeDomainStatus(), now=NOW).status
        domains.append(domain(status, name=f"d{len(domains)}"))
    assert registry.get_sample_value("cdo_domains", {"phase": "Ready"}) == 2
    assert registry.get_sample_value("cdo_domains", {"phase": "Degraded"}) == 1
    assert registry.get_sample_value("cdo_domains", {"phase": "Pending"}) == 0
    assert registry.get_sample_value("cdo_domains_degraded_longest_seconds") == 90
