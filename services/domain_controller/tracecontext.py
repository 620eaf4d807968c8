"""Which trace a domain's reconcile belongs to, and the trace annotations the controller keeps.

The controller owns two annotations on a ComputeDomain (docs/events.md, "One trace per story"):

- ``cdo.dev/trace-context``: the domain's own trace. A domain without a valid one gets the
  context of its first reconcile's span, which so becomes the root of the domain's trace; a
  value set at creation (a tool joining its own trace) is kept.
- ``cdo.dev/fault-trace-context``: the trace of a fault the domain is going through. The rule
  (:func:`fault_context`): while a node the domain uses carries the health monitor's fault
  context, the domain follows that fault; once none does (the node recovered, or the domain's
  pods left it), the domain keeps following it until it is Ready again (its evicted members
  waiting for room, replacements starting), and then forgets it.

A reconcile's span is a child of the fault context when there is one and of the domain's context
otherwise, with a link to the other (:func:`shared.tracing.story_parent`), so the path fault ->
taint -> Degraded -> replacement placed -> Ready is one trace and the domain's own story still
finds every step.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from shared.crds.computedomain import ComputeDomainStatus
from shared.crds.names import FAULT_TRACE_CONTEXT_ANNOTATION, TRACE_CONTEXT_ANNOTATION
from shared.kube.meta import KubeObject
from shared.tracing import parse_traceparent

READY = "Ready"
STORY_KEYS = (FAULT_TRACE_CONTEXT_ANNOTATION, TRACE_CONTEXT_ANNOTATION)
"""Annotation keys in the order they parent a reconcile span: the fault's trace first."""


def valid(value: str | None) -> bool:
    return bool(value) and parse_traceparent(value or "") is not None


def ready(status: ComputeDomainStatus) -> bool:
    condition = status.condition(READY)
    return condition is not None and condition.status == "True"


def node_fault_contexts(nodes: Iterable[KubeObject | None]) -> list[str]:
    """The valid fault contexts the given nodes carry, sorted and without repeats."""
    values = {
        node.metadata.annotations.get(FAULT_TRACE_CONTEXT_ANNOTATION, "")
        for node in nodes
        if node is not None
    }
    return sorted(value for value in values if valid(value))


def fault_context(*, recorded: str | None, on_nodes: list[str], ready: bool) -> str | None:
    """The fault trace a domain follows (see the module docstring).

    ``recorded`` is the domain's fault annotation, ``on_nodes`` the fault contexts of the nodes
    it uses (sorted), ``ready`` whether its Ready condition is True. Of several faults at once
    the one already followed stays, else the first: a stable choice, so no write flaps.
    """
    recorded = recorded if valid(recorded) else None
    if on_nodes:
        return recorded if recorded in on_nodes else on_nodes[0]
    return None if ready else recorded


def story(annotations: Mapping[str, str], fault: str | None) -> dict[str, str]:
    """The annotations a reconcile span's parent is chosen from: the domain's own, with the
    fault it follows now in place of the recorded one."""
    chosen = {key: annotations[key] for key in STORY_KEYS if key in annotations}
    chosen.pop(FAULT_TRACE_CONTEXT_ANNOTATION, None)
    if fault is not None:
        chosen[FAULT_TRACE_CONTEXT_ANNOTATION] = fault
    return chosen


def desired_annotations(
    current: Mapping[str, str], *, own_trace: str | None, fault: str | None
) -> dict[str, str | None]:
    """The controller's trace annotations as they should be (None: absent).

    ``own_trace`` is the traceparent of the running reconcile's span, used only when the
    domain has no valid trace context of its own yet.
    """
    trace_context = current.get(TRACE_CONTEXT_ANNOTATION)
    return {
        TRACE_CONTEXT_ANNOTATION: trace_context if valid(trace_context) else own_trace,
        FAULT_TRACE_CONTEXT_ANNOTATION: fault,
    }
