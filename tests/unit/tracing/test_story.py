"""The story annotations every service shares: which they are, the parent they give a span, the
patch that keeps them."""

from __future__ import annotations

import msgspec
from opentelemetry import trace
from opentelemetry.trace import SpanContext

from shared.crds.names import FAULT_TRACE_CONTEXT_ANNOTATION, TRACE_CONTEXT_ANNOTATION
from shared.kube.models import Node
from shared.tracing.story import (
    STORY_KEYS,
    node_faults,
    story_annotations,
    story_parent,
    story_patch,
    story_with_fault,
)

KEY = "example.dev/trace-context"
OTHER = "example.dev/fault-trace-context"
DOMAIN = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
FAULT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
LATER_FAULT = "00-5bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
FAULT_A, FAULT_B = FAULT, LATER_FAULT


def span_context(context: object) -> SpanContext:
    return trace.get_current_span(context).get_span_context()  # type: ignore[arg-type]


def node(name: str, fault: str | None = None) -> Node:
    annotations = {FAULT_TRACE_CONTEXT_ANNOTATION: fault} if fault is not None else {}
    return msgspec.convert({"metadata": {"name": name, "annotations": annotations}}, Node)


def placement_changes(placement: dict[str, str], domain: dict[str, str]) -> dict[str, str | None]:
    """What the allocator merges into its write of a Placement: copies of the domain's story."""
    return story_patch(placement, story_annotations(domain))


def test_the_faults_trace_parents_before_the_domains() -> None:
    assert STORY_KEYS == (FAULT_TRACE_CONTEXT_ANNOTATION, TRACE_CONTEXT_ANNOTATION)


def test_the_story_parents_a_span_by_default() -> None:
    parent, links = story_parent(
        {TRACE_CONTEXT_ANNOTATION: DOMAIN, FAULT_TRACE_CONTEXT_ANNOTATION: FAULT}
    )
    assert format(span_context(parent).trace_id, "032x") == FAULT[3:35]
    assert [format(link.context.trace_id, "032x") for link in links] == [DOMAIN[3:35]]


def test_the_first_valid_key_is_the_parent_and_the_others_are_links() -> None:
    parent, links = story_parent({KEY: DOMAIN, OTHER: FAULT}, keys=(OTHER, KEY))
    assert format(span_context(parent).trace_id, "032x") == FAULT[3:35]
    assert [format(link.context.trace_id, "032x") for link in links] == [DOMAIN[3:35]]


def test_a_single_or_repeated_context_has_no_links() -> None:
    parent, links = story_parent({KEY: DOMAIN}, keys=(OTHER, KEY))
    assert format(span_context(parent).span_id, "016x") == DOMAIN[36:52]
    assert links == []
    _, links = story_parent({KEY: DOMAIN, OTHER: DOMAIN}, keys=(OTHER, KEY))
    assert links == []


def test_no_context_means_a_root_span() -> None:
    assert story_parent({OTHER: "garbage"}, keys=(OTHER, KEY)) == (None, [])


def test_fault_contexts_of_nodes_skip_healthy_missing_and_malformed() -> None:
    nodes = [node("a", FAULT_B), node("b"), None, node("c", "junk"), node("d", FAULT_A)]
    assert node_faults(nodes) == sorted([FAULT_A, FAULT_B])
    assert node_faults([node("a", FAULT_A), node("b", FAULT_A)]) == [FAULT_A]


def test_node_faults_are_the_valid_contexts_the_nodes_carry() -> None:
    nodes = [node("a", LATER_FAULT), node("b"), None, node("c", "junk"), node("d", FAULT)]
    assert node_faults(nodes) == [FAULT, LATER_FAULT]


def test_the_story_uses_the_fault_followed_now() -> None:
    annotations = {
        TRACE_CONTEXT_ANNOTATION: DOMAIN,
        FAULT_TRACE_CONTEXT_ANNOTATION: FAULT_A,
        "other": "x",
    }
    assert story_with_fault(annotations, FAULT_B) == {
        TRACE_CONTEXT_ANNOTATION: DOMAIN,
        FAULT_TRACE_CONTEXT_ANNOTATION: FAULT_B,
    }
    assert story_with_fault(annotations, None) == {TRACE_CONTEXT_ANNOTATION: DOMAIN}


def test_only_trace_annotations_are_copied() -> None:
    domain = {TRACE_CONTEXT_ANNOTATION: DOMAIN, "kubectl.kubernetes.io/last-applied": "{}"}
    assert story_annotations(domain) == {TRACE_CONTEXT_ANNOTATION: DOMAIN}
    assert story_annotations({}) == {}


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


def test_the_patch_names_only_story_keys_that_differ() -> None:
    current = {TRACE_CONTEXT_ANNOTATION: DOMAIN, "someone.else/note": "x"}
    desired = {TRACE_CONTEXT_ANNOTATION: DOMAIN, FAULT_TRACE_CONTEXT_ANNOTATION: FAULT}
    assert story_patch(current, desired) == {FAULT_TRACE_CONTEXT_ANNOTATION: FAULT}
    assert story_patch(current, {TRACE_CONTEXT_ANNOTATION: DOMAIN, "someone.else/note": "y"}) == {}
    assert story_patch(current, {}) == {TRACE_CONTEXT_ANNOTATION: None}
