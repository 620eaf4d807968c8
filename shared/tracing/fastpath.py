"""The messaging fast path: SDK spans built without ``Tracer.start_span``.

``Tracer.start_span`` and ``Span.__init__`` re-validate every argument and attribute on each
call, which on the per-message path costs more than everything else the bus does. For the SDK's
tracer, with no SDK self-metrics and a sampler whose decision depends only on the parent's
sampled flag and the trace id (the default ``ParentBased`` over ALWAYS_ON, ALWAYS_OFF or a
trace-id ratio, or one of those alone), :func:`fast_path` returns a :class:`FastPath` that makes
the sampling decision inline and sets a span's fields once. Ending, exporting and the span API
stay the SDK's own, and span processors see the same spans as through ``Tracer.start_span``.

This is the one module that relies on the SDK's private layout: the tracer's ``_span_limits``
and ``_instrumentation_scope``, the samplers' delegates and bound, the fields of
``sdk.trace._Span`` and ``BoundedAttributes._dict``. :func:`fast_path` checks at run time that
a span built here has exactly the fields of the SDK's own and returns None otherwise, so an SDK
laid out differently takes the public path; ``tests/unit/tracing/test_fastpath_sdk.py`` fails
when an SDK upgrade changes what this module relies on, so the slower path is not taken
silently.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from time import time_ns
from typing import Any

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk import trace as sdk_trace
from opentelemetry.sdk.trace import EventBase
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    ParentBased,
    Sampler,
    TraceIdRatioBased,
)
from opentelemetry.sdk.util import BoundedList
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    Tracer,
)
from opentelemetry.util.types import AnyValue

from shared.tracing.propagation import FLAGS

ATTRIBUTES_PER_SPAN = 5
"""The most attributes a messaging span gets: the fast path needs room for all of them."""

_RANDOM_TRACE_ID = 0x02  # W3C Trace Context level 2; older SDKs never set it
_UNSET = Status(StatusCode.UNSET)
_NONE_YET: BoundedList[Any] = BoundedList(0)
"""The events and links of a span that has none: shared, never appended to."""
_ALWAYS = 1 << 64  # a sampling bound every 64-bit trace id part is below


def _root_bound(sampler: Sampler) -> int | None:
    """The bound TraceIdRatioBased compares trace ids with, for the samplers that are one."""
    if sampler is ALWAYS_ON:
        return _ALWAYS
    if sampler is ALWAYS_OFF:
        return 0
    if type(sampler) is TraceIdRatioBased:
        return sampler.bound
    return None


def sampling_plan(sampler: Sampler) -> tuple[bool, int] | None:
    """(children follow a valid parent's decision, bound for the others) for the samplers whose
    decision depends on nothing but that; None for any other sampler."""
    if isinstance(sampler, ParentBased):
        delegates = (
            sampler._remote_parent_sampled,
            sampler._remote_parent_not_sampled,
            sampler._local_parent_sampled,
            sampler._local_parent_not_sampled,
        )
        bound = _root_bound(sampler._root)
        if delegates != (ALWAYS_ON, ALWAYS_OFF, ALWAYS_ON, ALWAYS_OFF) or bound is None:
            return None
        return True, bound
    bound = _root_bound(sampler)
    return None if bound is None else (False, bound)


class MessagingSpan(sdk_trace.Span):
    """An SDK span whose fields are set directly (see the module docstring)."""

    def __init__(
        self,
        tracer: sdk_trace.Tracer,
        name: str,
        kind: SpanKind,
        context: SpanContext,
        parent: SpanContext | None,
        attributes: BoundedAttributes,
    ) -> None:
        limits = tracer._span_limits
        self._name = name
        self._context = context
        self._kind = kind
        self._instrumentation_info = tracer.instrumentation_info
        self._instrumentation_scope = tracer._instrumentation_scope
        self._parent = parent
        self._start_time = time_ns()
        self._end_time = None
        self._attributes = attributes
        # Messaging spans rarely get events or links: they share one empty list until they do.
        self._events = _NONE_YET
        self._links = _NONE_YET
        self._resource = tracer.resource
        self._status = _UNSET
        self._sampler = tracer.sampler
        self._trace_config = None
        self._record_exception = True
        self._set_status_on_exception = True
        self._span_processor = tracer.span_processor
        self._limits = limits
        self._lock = threading.Lock()
        self._record_end_metrics = None

    def _add_event(self, event: EventBase) -> None:
        if self._events is _NONE_YET:
            self._events = BoundedList(self._limits.max_events)
        super()._add_event(event)

    def _add_link(self, link: Link) -> None:
        if self._links is _NONE_YET:
            self._links = BoundedList(self._limits.max_links)
        super()._add_link(link)


def span_fields_match(tracer: sdk_trace.Tracer) -> bool:
    """Whether a MessagingSpan has exactly the fields the installed SDK gives its own spans."""
    try:
        limits = tracer._span_limits
        probe_context = SpanContext(1, 1, is_remote=False)
        reference = sdk_trace._Span(
            "probe",
            probe_context,
            resource=tracer.resource,
            limits=limits,
            instrumentation_scope=tracer._instrumentation_scope,
        )
        attributes = BoundedAttributes(limits.max_span_attributes, immutable=False)
        ours = MessagingSpan(tracer, "probe", SpanKind.INTERNAL, probe_context, None, attributes)
        return set(vars(ours)) == set(vars(reference)) and isinstance(attributes._dict, dict)
    except Exception:  # an SDK laid out differently: use its public path
        return False


def _always() -> bool:
    return True


class FastPath:
    """Spans of one SDK tracer built directly, for a sampler :func:`sampling_plan` accepts."""

    def __init__(self, tracer: sdk_trace.Tracer, plan: tuple[bool, int]) -> None:
        self._tracer = tracer
        self._follow_parent, self._bound = plan
        random_roots = getattr(tracer.id_generator, "is_trace_id_random", None)
        self._random_roots = bool(random_roots and random_roots())
        self._max_value_len = tracer._span_limits.max_span_attribute_length
        self.enabled: Callable[[], bool] = getattr(tracer, "_is_enabled", _always)
        """Whether the tracer records now: a tracer configurator can switch it off at any time
        (SDKs that have them); while it is off, spans take the public path."""

    def start(
        self,
        name: str,
        kind: SpanKind,
        parent: SpanContext | None,
        attributes: dict[str, AnyValue],
    ) -> Span:
        """What ``Tracer.start_span`` does for the samplers :func:`sampling_plan` accepts."""
        sdk = self._tracer
        if parent is None:
            trace_id = sdk.id_generator.generate_trace_id()
            random_flag = _RANDOM_TRACE_ID if self._random_roots else 0
            state = None
        else:
            trace_id = parent.trace_id
            random_flag = parent.trace_flags & _RANDOM_TRACE_ID
            state = parent.trace_state
        if parent is not None and self._follow_parent:
            sampled = parent.trace_flags.sampled
        else:
            sampled = (trace_id & TraceIdRatioBased.TRACE_ID_LIMIT) < self._bound
        context = SpanContext(
            trace_id,
            sdk.id_generator.generate_span_id(),
            is_remote=False,
            trace_flags=FLAGS[random_flag | sampled],
            trace_state=state,
        )
        if not sampled:
            return NonRecordingSpan(context)
        bounded = BoundedAttributes(
            sdk._span_limits.max_span_attributes,
            immutable=False,
            max_value_len=self._max_value_len,
        )
        if self._max_value_len is not None:
            limit = self._max_value_len
            attributes = {
                key: value[:limit] if isinstance(value, str) else value
                for key, value in attributes.items()
            }
        bounded._dict = attributes
        span = MessagingSpan(sdk, name, kind, context, parent, bounded)
        # No parent context for the processors: the extracted one would carry nothing but the
        # parent span, which the span itself records.
        sdk.span_processor.on_start(span, parent_context=None)
        return span


def fast_path(tracer: Tracer) -> FastPath | None:
    """The fast path for ``tracer``; None where spans must go through ``Tracer.start_span``
    (the API's no-op tracer, other samplers, SDK self-metrics, an SDK laid out differently)."""
    if not isinstance(tracer, sdk_trace.Tracer):
        return None
    plan = sampling_plan(tracer.sampler)
    limits = tracer._span_limits
    # SDK self-metrics count spans in Tracer.start_span; only their no-op is skipped.
    metrics = getattr(tracer, "_tracer_metrics", None)
    plain = metrics is None or type(metrics).__name__ == "NoOpTracerMetrics"
    room = limits.max_span_attributes is None or limits.max_span_attributes >= ATTRIBUTES_PER_SPAN
    if plan is None or not plain or not room or not span_fields_match(tracer):
        return None
    return FastPath(tracer, plan)
