"""OpenTelemetry for cdo services: one TracerProvider per service, W3C context in NATS headers.

Spans are exported over OTLP/HTTP when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or the traces-specific
variable) is set; the exporter reads the standard OTEL_* variables itself. Without an endpoint
spans are still created, so trace ids flow through headers and appear in logs.

Messaging spans follow the OpenTelemetry messaging conventions: a PRODUCER span named
``publish <subject template>`` around a publish, and a CONSUMER span ``process <subject
template>`` around handling, whose parent is the producer context carried in ``traceparent``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from time import time_ns
from typing import Annotated, Any

from msgspec import Meta
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.context import Context
from opentelemetry.sdk import trace as sdk_trace
from opentelemetry.sdk.resources import SERVICE_INSTANCE_ID, SERVICE_NAME, Resource
from opentelemetry.sdk.trace import EventBase, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
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
    TraceFlags,
    Tracer,
    TraceState,
)
from opentelemetry.util.types import AnyValue

from shared.settings import Settings

INSTRUMENTATION_NAME = "cdo"


class TracingSettings(Settings, frozen=True, kw_only=True):
    """Sampling; the export endpoint comes from the standard OTEL_EXPORTER_OTLP_* variables."""

    sample_ratio: Annotated[
        float,
        Meta(description="Share of new traces sampled (children follow their parent).", ge=0, le=1),
    ] = 1.0


def export_configured(environ: Mapping[str, str] | None = None) -> bool:
    environ = os.environ if environ is None else environ
    return bool(
        environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def _root_sampler(ratio: float) -> Sampler:
    # ALWAYS_ON decides without hashing the trace id: cheaper on every span.
    return ALWAYS_ON if ratio >= 1.0 else TraceIdRatioBased(ratio)


def setup_tracing(
    *, service: str, instance: str, settings: TracingSettings | None = None
) -> TracerProvider:
    """A TracerProvider for one service, exporting over OTLP/HTTP when configured."""
    settings = settings or TracingSettings()
    provider = TracerProvider(
        resource=Resource.create({SERVICE_NAME: service, SERVICE_INSTANCE_ID: instance}),
        sampler=ParentBased(_root_sampler(settings.sample_ratio)),
    )
    if export_configured():
        # Imported here: the exporter pulls in requests and protobuf, which a service that
        # does not export need not load.
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider


def _messaging_attributes(*, operation: str, subject: str, template: str) -> dict[str, str]:
    # Few attributes on purpose: they are set on every message. The message id and CloudEvent
    # type are in the message itself and in the span name's template.
    return {
        "messaging.system": "nats",
        "messaging.operation.type": operation,
        "messaging.destination.name": subject,
        "messaging.destination.template": template,
    }


def format_traceparent(span_context: SpanContext) -> str:
    return (
        f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}"
        f"-{span_context.trace_flags:02x}"
    )


def inject(headers: MutableMapping[str, str], span_context: SpanContext) -> None:
    """Write ``span_context`` as W3C ``traceparent`` (and ``tracestate``) into ``headers``.

    Formatted here rather than through the SDK's propagator, which costs several times more
    on the per-message path; the tests check both read each other's headers.
    """
    if not span_context.is_valid:
        return
    headers["traceparent"] = format_traceparent(span_context)
    if span_context.trace_state:
        headers["tracestate"] = span_context.trace_state.to_header()


def parse_traceparent(value: str, state: str | None = None) -> SpanContext | None:
    """The remote span context in a W3C ``traceparent`` value; None if it is invalid."""
    if len(value) == 55 and value[:3] == "00-" and value[35] == "-" and value[52] == "-":
        # The one form version 00 allows, as every producer writes it: sliced, not split.
        try:
            trace_id = int(value[3:35], 16)
            span_id = int(value[36:52], 16)
            flags = int(value[53:], 16)
        except ValueError:
            return None
        if trace_id <= 0 or span_id <= 0 or flags < 0:  # int() takes a sign where "-" splits
            return None
        return SpanContext(
            trace_id=trace_id,
            span_id=span_id,
            is_remote=True,
            trace_flags=_FLAGS[flags & TraceFlags.SAMPLED],
            trace_state=TraceState.from_header([state]) if state else None,
        )
    parts = value.strip().split("-")
    # Version 00 has exactly four fields; later versions may append more (W3C Trace Context).
    if len(parts) < 4 or len(parts[0]) != 2 or parts[0] == "ff":
        return None
    if parts[0] == "00" and len(parts) != 4:
        return None
    version, trace_hex, span_hex, flags_hex = parts[:4]
    if len(trace_hex) != 32 or len(span_hex) != 16 or len(flags_hex) != 2:
        return None
    try:
        int(version, 16)
        trace_id, span_id, flags = int(trace_hex, 16), int(span_hex, 16), int(flags_hex, 16)
    except ValueError:
        return None
    if trace_id == 0 or span_id == 0:
        return None
    return SpanContext(
        trace_id=trace_id,
        span_id=span_id,
        is_remote=True,
        trace_flags=_FLAGS[flags & TraceFlags.SAMPLED],
        trace_state=TraceState.from_header([state]) if state else None,
    )


def extract(headers: Mapping[str, str]) -> Context | None:
    """The remote parent carried by W3C ``traceparent``/``tracestate``; None if absent/invalid.

    ``headers`` must have lower-case names.
    """
    value = headers.get("traceparent")
    if value is None:
        return None
    parent = parse_traceparent(value, headers.get("tracestate"))
    return None if parent is None else trace.set_span_in_context(NonRecordingSpan(parent))


_FLAGS = tuple(TraceFlags(flags) for flags in range(4))
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


def _sampling_plan(sampler: Sampler) -> tuple[bool, int] | None:
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


class _MessagingSpan(sdk_trace.Span):
    """An SDK span whose fields are set directly: ``Tracer.start_span`` and ``Span.__init__``
    re-validate every argument and attribute on each call, which on the per-message path costs
    more than everything else the bus does. Ending, exporting and the API are the SDK's own."""

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


def _span_fields_match(tracer: sdk_trace.Tracer) -> bool:
    """Whether a _MessagingSpan has exactly the fields the installed SDK gives its own spans."""
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
        ours = _MessagingSpan(tracer, "probe", SpanKind.INTERNAL, probe_context, None, attributes)
        return set(vars(ours)) == set(vars(reference)) and isinstance(attributes._dict, dict)
    except Exception:  # an SDK laid out differently: use its public path
        return False


class MessagingTracer:
    """PRODUCER and CONSUMER spans of one tracer, at the least per-message cost.

    With the SDK's tracer, no SDK self-metrics and a sampler whose decision depends only on the
    parent's sampled flag and the trace id (the default ``ParentBased`` over ALWAYS_ON, ALWAYS_OFF
    or a trace-id ratio, or one of those alone), spans are built directly with attributes
    prepared once per subject template; the span processors see the same spans as through
    ``Tracer.start_span``. Any other tracer (the API's no-op one, custom samplers) goes through
    ``Tracer.start_span``.
    """

    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer
        self._sdk: sdk_trace.Tracer | None = None
        self._follow_parent = True
        self._bound = _ALWAYS
        self._random_roots = False
        self._max_value_len: int | None = None
        self._publish_names: dict[str, str] = {}
        self._process_names: dict[str, str] = {}
        # A tracer configurator can switch a tracer off at any time (SDKs that have them).
        self._enabled: Callable[[], bool] = getattr(tracer, "_is_enabled", _always)
        if isinstance(tracer, sdk_trace.Tracer):
            plan = _sampling_plan(tracer.sampler)
            limits = tracer._span_limits
            # SDK self-metrics count spans in Tracer.start_span; only their no-op is skipped.
            metrics = getattr(tracer, "_tracer_metrics", None)
            plain = metrics is None or type(metrics).__name__ == "NoOpTracerMetrics"
            room = limits.max_span_attributes is None or limits.max_span_attributes >= 5
            if plan is not None and plain and room and _span_fields_match(tracer):
                self._sdk = tracer
                self._follow_parent, self._bound = plan
                random_roots = getattr(tracer.id_generator, "is_trace_id_random", None)
                self._random_roots = bool(random_roots and random_roots())
                self._max_value_len = limits.max_span_attribute_length

    @property
    def fast(self) -> bool:
        """Whether spans are built directly (see the class documentation)."""
        return self._sdk is not None

    def _start(
        self,
        sdk: sdk_trace.Tracer,
        name: str,
        kind: SpanKind,
        parent: SpanContext | None,
        attributes: dict[str, AnyValue],
    ) -> Span:
        """What ``Tracer.start_span`` does for the samplers :func:`_sampling_plan` accepts."""
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
            trace_flags=_FLAGS[random_flag | sampled],
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
        span = _MessagingSpan(sdk, name, kind, context, parent, bounded)
        # No parent context for the processors: the extracted one would carry nothing but the
        # parent span, which the span itself records.
        sdk.span_processor.on_start(span, parent_context=None)
        return span

    def start_publish(self, *, subject: str, template: str) -> tuple[Span, str | None, str | None]:
        """Start the PRODUCER span of a publish; returns it with its ``traceparent`` and
        ``tracestate`` header values (None where there is nothing to send).

        The caller ends the span. It is not made current: nothing runs inside it but the publish.
        """
        sdk = self._sdk
        if sdk is None or not self._enabled():
            headers: dict[str, str] = {}
            span = _start_publish_generic(self._tracer, headers, subject, template)
            return span, headers.get("traceparent"), headers.get("tracestate")
        current = trace.get_current_span().get_span_context()
        span = self._start(
            sdk,
            self._publish_names.get(template)
            or _remember(self._publish_names, template, "publish"),
            SpanKind.PRODUCER,
            current if current.is_valid else None,
            {
                "messaging.system": "nats",
                "messaging.operation.type": "send",
                "messaging.destination.name": subject,
                "messaging.destination.template": template,
            },
        )
        context = span.get_span_context()
        state = context.trace_state.to_header() if context.trace_state else None
        return span, format_traceparent(context), state

    def start_process(
        self,
        *,
        headers: Mapping[str, str],
        subject: str,
        template: str,
        consumer_group: str | None = None,
    ) -> tuple[Span, object]:
        """Start the CONSUMER span of handling one message and make it current.

        Its parent is the producer's span from the (lower-case) ``traceparent`` header, so one
        trace crosses services. Returns the span and a token for :func:`end_process_span`.
        """
        sdk = self._sdk
        if sdk is None or not self._enabled():
            return _start_process_generic(self._tracer, headers, subject, template, consumer_group)
        value = headers.get("traceparent")
        parent = None if value is None else parse_traceparent(value, headers.get("tracestate"))
        attributes: dict[str, AnyValue] = {
            "messaging.system": "nats",
            "messaging.operation.type": "process",
            "messaging.destination.name": subject,
            "messaging.destination.template": template,
        }
        if consumer_group:
            attributes["messaging.consumer.group.name"] = consumer_group
        span = self._start(
            sdk,
            self._process_names.get(template)
            or _remember(self._process_names, template, "process"),
            SpanKind.CONSUMER,
            parent,
            attributes,
        )
        return span, otel_context.attach(trace.set_span_in_context(span))


def _always() -> bool:
    return True


def _remember(names: dict[str, str], template: str, operation: str) -> str:
    name = names[template] = f"{operation} {template}"
    return name


def _start_publish_generic(
    tracer: Tracer, headers: MutableMapping[str, str], subject: str, template: str
) -> Span:
    span = tracer.start_span(f"publish {template}", kind=SpanKind.PRODUCER)
    if span.is_recording():
        span.set_attributes(
            _messaging_attributes(operation="send", subject=subject, template=template)
        )
    inject(headers, span.get_span_context())
    return span


def _start_process_generic(
    tracer: Tracer,
    headers: Mapping[str, str],
    subject: str,
    template: str,
    consumer_group: str | None,
) -> tuple[Span, object]:
    span = tracer.start_span(
        f"process {template}", context=extract(headers), kind=SpanKind.CONSUMER
    )
    if span.is_recording():
        attributes = _messaging_attributes(operation="process", subject=subject, template=template)
        if consumer_group:
            attributes["messaging.consumer.group.name"] = consumer_group
        span.set_attributes(attributes)
    token = otel_context.attach(trace.set_span_in_context(span))
    return span, token


def start_publish_span(
    tracer: Tracer, *, headers: MutableMapping[str, str], subject: str, template: str
) -> Span:
    """Start the PRODUCER span of a publish and write its context into ``headers``.

    The caller ends the span. It is not made current: nothing runs inside it but the publish.
    The per-message path keeps a :class:`MessagingTracer` instead.
    """
    return _start_publish_generic(tracer, headers, subject, template)


def start_process_span(
    tracer: Tracer,
    *,
    headers: Mapping[str, str],
    subject: str,
    template: str,
    consumer_group: str | None = None,
) -> tuple[Span, object]:
    """Start the CONSUMER span of handling one message and make it current.

    Its parent is the producer's span from the headers, so one trace crosses services. Returns
    the span and a token for :func:`end_process_span`, which the caller must call.
    """
    return _start_process_generic(tracer, headers, subject, template, consumer_group)


def end_process_span(span: Span, token: object) -> None:
    otel_context.detach(token)  # type: ignore[arg-type]
    span.end()


def mark_error(span: Span, exc: BaseException) -> None:
    span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR, str(exc)))


def current_trace_id() -> str | None:
    """The current trace id in hex, or None outside a span."""
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


# -- trace context carried on API objects ---------------------------------------------------
# Work that a watch event starts has no message headers to take a parent from, so the objects a
# story runs through carry it instead: a W3C ``traceparent`` value in an annotation. The
# annotation names are API and live in ``shared.crds.names``; they are arguments here because
# importing the CRD package would make this module, which every service loads, far heavier.


def exports(tracer: Tracer | None) -> bool:
    """Whether spans of ``tracer`` go anywhere: an SDK tracer with a span processor attached.

    Services write trace annotations only then, so that with tracing off no object changes.
    """
    if not isinstance(tracer, sdk_trace.Tracer):
        return False
    processors = getattr(tracer.span_processor, "_span_processors", None)
    # A processor of another shape than the SDK's own fan-out: assume it exports.
    return True if processors is None else bool(processors)


def span_context_from_annotations(
    annotations: Mapping[str, str], *, key: str
) -> SpanContext | None:
    """The remote span context in annotation ``key``; None when absent or not a traceparent."""
    value = annotations.get(key)
    return None if not value else parse_traceparent(value)


def context_from_annotations(annotations: Mapping[str, str], *, key: str) -> Context | None:
    """A parent context from annotation ``key`` (see :func:`annotations_for`); None if none."""
    parent = span_context_from_annotations(annotations, key=key)
    return None if parent is None else trace.set_span_in_context(NonRecordingSpan(parent))


def annotations_for(span: Span, *, key: str) -> dict[str, str]:
    """The annotation that makes later work a child of ``span``; empty for an invalid span."""
    context = span.get_span_context()
    return {key: format_traceparent(context)} if context.is_valid else {}


def story_parent(
    annotations: Mapping[str, str], *, keys: Sequence[str]
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


def annotation_changes(
    current: Mapping[str, str], desired: Mapping[str, str | None]
) -> dict[str, str | None]:
    """The merge-patch entries that bring annotations ``current`` to ``desired``; empty when
    they already are. A value of None removes the key; keys not in ``desired`` stay untouched.
    Writing only these keeps annotation writes from causing a reconcile loop."""
    return {
        key: value
        for key, value in desired.items()
        if (value is None and key in current) or (value is not None and current.get(key) != value)
    }
