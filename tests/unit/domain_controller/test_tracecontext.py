"""Which fault a domain's trace follows, and the trace annotations the controller writes."""

from __future__ import annotations

from typing import Any

import msgspec

from services.domain_controller.tracecontext import desired_annotations, fault_context, ready
from shared.crds.computedomain import ComputeDomainStatus
from shared.crds.names import FAULT_TRACE_CONTEXT_ANNOTATION, TRACE_CONTEXT_ANNOTATION

DOMAIN = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
FAULT_A = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
FAULT_B = "00-5bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def status(ready_status: str) -> ComputeDomainStatus:
    body: dict[str, Any] = {
        "conditions": [
            {
                "type": "Ready",
                "status": ready_status,
                "reason": "AllMembersReady" if ready_status == "True" else "PodsNotRunning",
                "message": "",
                "lastTransitionTime": "2025-01-01T00:00:00Z",
            }
        ]
    }
    return msgspec.convert(body, ComputeDomainStatus)


def test_a_fault_on_a_node_the_domain_uses_is_followed() -> None:
    assert fault_context(recorded=None, on_nodes=[FAULT_A], ready=True) == FAULT_A


def test_the_fault_already_followed_stays_while_its_node_carries_it() -> None:
    both = sorted([FAULT_A, FAULT_B])
    assert fault_context(recorded=FAULT_B, on_nodes=both, ready=False) == FAULT_B
    assert fault_context(recorded=None, on_nodes=both, ready=False) == both[0]


def test_a_newer_fault_replaces_one_no_node_carries_any_more() -> None:
    assert fault_context(recorded=FAULT_A, on_nodes=[FAULT_B], ready=False) == FAULT_B


def test_the_fault_is_followed_after_its_node_recovered_until_the_domain_is_ready() -> None:
    assert fault_context(recorded=FAULT_A, on_nodes=[], ready=False) == FAULT_A


def test_the_fault_is_forgotten_once_the_domain_is_ready_again() -> None:
    assert fault_context(recorded=FAULT_A, on_nodes=[], ready=True) is None
    assert fault_context(recorded="junk", on_nodes=[], ready=False) is None


def test_ready_reads_the_condition() -> None:
    assert ready(status("True"))
    assert not ready(status("False"))
    assert not ready(ComputeDomainStatus())


def test_the_domain_gets_the_first_reconciles_context_unless_it_has_one() -> None:
    assert desired_annotations({}, own_trace=DOMAIN, fault=None) == {
        TRACE_CONTEXT_ANNOTATION: DOMAIN,
        FAULT_TRACE_CONTEXT_ANNOTATION: None,
    }
    set_by_a_tool = {TRACE_CONTEXT_ANNOTATION: FAULT_B}
    desired = desired_annotations(set_by_a_tool, own_trace=DOMAIN, fault=FAULT_A)
    assert desired == {TRACE_CONTEXT_ANNOTATION: FAULT_B, FAULT_TRACE_CONTEXT_ANNOTATION: FAULT_A}
    malformed = {TRACE_CONTEXT_ANNOTATION: "junk"}
    desired = desired_annotations(malformed, own_trace=DOMAIN, fault=None)
    assert desired[TRACE_CONTEXT_ANNOTATION] == DOMAIN
