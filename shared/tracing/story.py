"""The trace "story" an object carries: which annotations, which parent they give a span, and
the annotation patch that keeps them (docs/events.md, "One trace per story").

Two annotations tell which trace work on a ComputeDomain (or its Placement) belongs to: the
domain's own trace (``cdo.dev/trace-context``) and the trace of a fault the domain goes through
(``cdo.dev/fault-trace-context``, also on the faulty Node). A span of such work is a child of the
fault's context when there is one and of the domain's otherwise, with a link to the other
(:func:`story_parent`). Which fault a domain follows is the domain controller's decision
(``services/domain_controller/tracecontext.py``); the allocator copies both annotations onto the
Placement, so the IMEX agent joins the same stories without reading the domain.

Kept out of the package's ``__init__``: it imports the CRD names, which the rest of
:mod:`shared.tracing` (loaded by every service) does without.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, NonRecordingSpan

from shared.crds.names import FAULT_TRACE_CONTEXT_ANNOTATION, TRACE_CONTEXT_ANNOTATION
from shared.tracing.propagation import (
    annotation_changes,
    is_traceparent,
    span_context_from_annotations,
)

if TYPE_CHECKING:
    from shared.kube.meta import KubeObject

STORY_KEYS = (FAULT_TRACE_CONTEXT_ANNOTATION, TRACE_CONTEXT_ANNOTATION)
"""The trace annotations of a story, in the order they parent a span: the fault's trace first."""


def story_annotations(annotations: Mapping[str, str]) -> dict[str, str]:
    """The story annotations among ``annotations`` that have a value (what a Placement copies
    from its domain, and what the IMEX agent reads from the Placement)."""
    return {key: annotations[key] for key in STORY_KEYS if annotations.get(key)}


def story_with_fault(annotations: Mapping[str, str], fault: str | None) -> dict[str, str]:
    """The annotations a span's parent is chosen from: the object's story, with ``fault`` (the
    fault it follows now; None: none) in place of the recorded one."""
    chosen = story_annotations(annotations)
    chosen.pop(FAULT_TRACE_CONTEXT_ANNOTATION, None)
    if fault is not None:
        chosen[FAULT_TRACE_CONTEXT_ANNOTATION] = fault
    return chosen


def node_faults(nodes: Iterable[KubeObject | None]) -> list[str]:
    """The valid fault contexts the given nodes carry (health monitor), sorted, no repeats."""
    values = {
        node.metadata.annotations.get(FAULT_TRACE_CONTEXT_ANNOTATION, "")
        for node in nodes
        if node is not None
    }
    return sorted(value for value in values if is_traceparent(value))


def story_parent(
    annotations: Mapping[str, str], *, keys: Sequence[str] = STORY_KEYS
) -> tuple[Context | None, list[Link]]:
    """Parent and links for a span of work on an object carrying trace annotations.

    The first of ``keys`` holding a valid context is the parent; every other valid one, unless
    it is that same context, becomes a link, so the span is found from each story it is part of.
    """
    found = [
        context
        for key in keys
        if (context := span_context_from_annotations(annotations, key=key)) is not None
    ]
    if not found:
        return None, []
    parent, *others = found
    links = [Link(other) for other in others if other != parent]
    return trace.set_span_in_context(NonRecordingSpan(parent)), links


def story_patch(
    current: Mapping[str, str], desired: Mapping[str, str | None]
) -> dict[str, str | None]:
    """The annotation entries a reconciler merges into the write it already makes, so that the
    story annotations of ``current`` become ``desired``: a story key ``desired`` lacks (or maps
    to None) is removed, other annotations stay untouched. Empty when they already match, so
    the writes cause no reconcile loop."""
    return annotation_changes(current, {key: desired.get(key) for key in STORY_KEYS})
