"""Which trace a placement decision belongs to, and the trace annotations a Placement carries.

The domain controller keeps two annotations on a ComputeDomain: the domain's own trace
(``cdo.dev/trace-context``) and the trace of a fault the domain is going through
(``cdo.dev/fault-trace-context``). A reconcile of the domain here is a child of the fault's
context when there is one, else of the domain's, with a link to the other; so the placement of a
domain joins the domain's story, and the placement of a replacement pod joins the fault's. A
fault a node of the domain carries counts before the controller has recorded it (:func:`story`).

The Placement carries copies of both, so the per-node services (the IMEX agent preparing a
claim of the domain) join the same stories without reading the ComputeDomain.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from shared.crds.names import FAULT_TRACE_CONTEXT_ANNOTATION, TRACE_CONTEXT_ANNOTATION
from shared.kube.meta import KubeObject
from shared.tracing import annotation_changes, parse_traceparent

STORY_KEYS = (FAULT_TRACE_CONTEXT_ANNOTATION, TRACE_CONTEXT_ANNOTATION)
"""Trace annotations in the order they parent a span: the fault's trace first."""


def node_faults(nodes: Iterable[KubeObject | None]) -> list[str]:
    """The valid fault contexts the given nodes carry (health monitor), sorted, no repeats."""
    values = {
        node.metadata.annotations.get(FAULT_TRACE_CONTEXT_ANNOTATION, "")
        for node in nodes
        if node is not None
    }
    return sorted(value for value in values if value and parse_traceparent(value) is not None)


def story(domain: Mapping[str, str], faults: list[str]) -> dict[str, str]:
    """The annotations a reconcile span's parent is chosen from.

    The domain's own; and when it records no fault yet but a node it uses carries one, that
    one: the domain controller records it a moment later, and a replacement pod placed in
    that moment belongs to the fault's trace all the same.
    """
    chosen = {key: domain[key] for key in STORY_KEYS if domain.get(key)}
    if FAULT_TRACE_CONTEXT_ANNOTATION not in chosen and faults:
        chosen[FAULT_TRACE_CONTEXT_ANNOTATION] = faults[0]
    return chosen


def copied_annotations(domain: Mapping[str, str]) -> dict[str, str]:
    """The domain's trace annotations, as its Placement carries them."""
    return {key: domain[key] for key in STORY_KEYS if domain.get(key)}


def placement_changes(
    placement: Mapping[str, str], domain: Mapping[str, str]
) -> dict[str, str | None]:
    """The annotation writes that make a Placement's copies match its domain; empty if they do.

    A copy the domain no longer has is removed; the Placement's other annotations stay.
    """
    wanted = copied_annotations(domain)
    return annotation_changes(placement, {key: wanted.get(key) for key in STORY_KEYS})
