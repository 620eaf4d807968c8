"""The fault's trace context on the Node: the annotation patch and resuming it after a restart."""

from __future__ import annotations

from services.health_monitor.nodepatch import annotation_patch
from services.health_monitor.state import resumed_trace
from shared.crds.names import FAULT_TRACE_CONTEXT_ANNOTATION

FAULT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_the_annotation_is_written_when_it_differs_and_removed_with_none() -> None:
    assert annotation_patch({}, {FAULT_TRACE_CONTEXT_ANNOTATION: FAULT}) == {
        "metadata": {"annotations": {FAULT_TRACE_CONTEXT_ANNOTATION: FAULT}}
    }
    current = {FAULT_TRACE_CONTEXT_ANNOTATION: FAULT, "other": "kept"}
    assert annotation_patch(current, {FAULT_TRACE_CONTEXT_ANNOTATION: FAULT}) is None
    assert annotation_patch(current, {FAULT_TRACE_CONTEXT_ANNOTATION: None}) == {
        "metadata": {"annotations": {FAULT_TRACE_CONTEXT_ANNOTATION: None}}
    }
    assert annotation_patch({}, {FAULT_TRACE_CONTEXT_ANNOTATION: None}) is None
    assert annotation_patch(current, {}) is None


def test_a_resumed_episode_keeps_the_trace_the_node_carries() -> None:
    assert resumed_trace({FAULT_TRACE_CONTEXT_ANNOTATION: FAULT}) == FAULT
    assert resumed_trace({FAULT_TRACE_CONTEXT_ANNOTATION: "junk"}) is None
    assert resumed_trace({}) is None
