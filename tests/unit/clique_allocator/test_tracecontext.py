"""Which trace the allocator's reconcile of a domain belongs to."""

from __future__ import annotations

from services.clique_allocator.tracecontext import story
from shared.crds.names import FAULT_TRACE_CONTEXT_ANNOTATION, TRACE_CONTEXT_ANNOTATION

DOMAIN = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
FAULT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
LATER_FAULT = "00-5bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_the_domains_recorded_fault_comes_first() -> None:
    domain = {TRACE_CONTEXT_ANNOTATION: DOMAIN, FAULT_TRACE_CONTEXT_ANNOTATION: FAULT}
    assert story(domain, [LATER_FAULT]) == domain


def test_a_fault_on_a_node_of_the_domain_counts_before_the_controller_records_it() -> None:
    domain = {TRACE_CONTEXT_ANNOTATION: DOMAIN}
    assert story(domain, [FAULT, LATER_FAULT]) == {
        TRACE_CONTEXT_ANNOTATION: DOMAIN,
        FAULT_TRACE_CONTEXT_ANNOTATION: FAULT,
    }
    assert story(domain, []) == domain
    assert story({"other": "x"}, []) == {}
