"""Which fault a domain's trace follows, and the trace annotations the controller keeps.

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
otherwise, with a link to the other (:func:`shared.tracing.story.story_parent`), so the path
fault -> taint -> Degraded -> replacement placed -> Ready is one trace and the domain's own story
still finds every step. What every service shares of that (the keys, the parent, the patch) is
in :mod:`shared.tracing.story`; this module holds the controller's own decisions.
"""

from __future__ import annotations

from collections.abc import Mapping

from shared.crds.computedomain import ComputeDomainStatus
from shared.crds.names import FAULT_TRACE_CONTEXT_ANNOTATION, TRACE_CONTEXT_ANNOTATION
from shared.tracing import is_traceparent

READY = "Ready"


def ready(status: ComputeDomainStatus) -> bool:
    condition = status.condition(READY)
    return condition is not None and condition.status == "True"


def fault_context(*, recorded: str | None, on_nodes: list[str], ready: bool) -> str | None:
    """The fault trace a domain follows (see the module docstring).

    ``recorded`` is the domain's fault annotation, ``on_nodes`` the fault contexts of the nodes
    it uses (sorted), ``ready`` whether its Ready condition is True. Of several faults at once
    the one already followed stays, else the first: a stable choice, so no write flaps.
    """
    recorded = recorded if is_traceparent(recorded) else None
    if on_nodes:
        return recorded if recorded in on_nodes else on_nodes[0]
    return None if ready else recorded


def desired_annotations(
    current: Mapping[str, str], *, own_trace: str | None, fault: str | None
) -> dict[str, str | None]:
    """The controller's trace annotations as they should be (None: absent).

    ``own_trace`` is the traceparent of the running reconcile's span, used only when the
    domain has no valid trace context of its own yet.
    """
    trace_context = current.get(TRACE_CONTEXT_ANNOTATION)
    return {
        TRACE_CONTEXT_ANNOTATION: trace_context if is_traceparent(trace_context) else own_trace,
        FAULT_TRACE_CONTEXT_ANNOTATION: fault,
    }
