"""The trace annotations a Placement copies from its domain."""

from __future__ import annotations

import msgspec

from services.clique_allocator.tracecontext import (
    copied_annotations,
    node_faults,
    placement_changes,
    story,
)
from shared.crds.names import FAULT_TRACE_CONTEXT_ANNOTATION, TRACE_CONTEXT_ANNOTATION
from shared.kube.models import Node

DOMAIN = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
FAULT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
LATER_FAULT = "00-5bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def node(name: str, fault: str | None = None) -> Node:
    annotations = {FAULT_TRACE_CONTEXT_ANNOTATION: fault} if fault is not None else {}
    return msgspec.convert({"metadata": {"name": name, "annotations": annotations}}, Node)


def test_node_faults_are_the_valid_contexts_the_nodes_carry() -> None:
    nodes = [node("a", LATER_FAULT), node("b"), None, node("c", "junk"), node("d", FAULT)]
    assert node_faults(nodes) == [FAULT, LATER_FAULT]


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


def test_only_trace_annotations_are_copied() -> None:
    domain = {TRACE_CONTEXT_ANNOTATION: DOMAIN, "kubectl.kubernetes.io/last-applied": "{}"}
    assert copied_annotations(domain) == {TRACE_CONTEXT_ANNOTATION: DOMAIN}
    assert copied_annotations({}) == {}


def test_a_placement_in_step_needs_no_write() -> None:
    domain = {TRACE_CONTEXT_ANNOTATION: DOMAIN}
    assert placement_changes({TRACE_CONTEXT_ANNOTATION: DOMAIN, "other": "x"}, domain) == {}


def test_a_placement_follows_the_domain_into_a_fault_and_out_again() -> None:
    placement = {TRACE_CONTEXT_ANNOTATION: DOMAIN}
    faulted = {TRACE_CONTEXT_ANNOTATION: DOMAIN, FAULT_TRACE_CONTEXT_ANNOTATION: FAULT}
    assert placement_changes(placement, faulted) == {FAULT_TRACE_CONTEXT_ANNOTATION: FAULT}
    back = {TRACE_CONTEXT_ANNOTATION: DOMAIN}
    assert placement_changes(faulted, back) == {FAULT_TRACE_CONTEXT_ANNOTATION: None}


def test_a_placement_written_before_the_domain_had_a_context_gets_it_later() -> None:
    assert placement_changes({}, {TRACE_CONTEXT_ANNOTATION: DOMAIN}) == {
        TRACE_CONTEXT_ANNOTATION: DOMAIN
    }
