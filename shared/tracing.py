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
from collections.abc import Mapping, MutableMapping
from typing import Annotated

from msgspec import Meta
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import SERVICE_INSTANCE_ID, SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, Sampler, TraceIdRatioBased
from opentelemetry.trace import (
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
    # Few attributes on purpose: the SDK validates each one on the per-message path. The
    # message id and CloudEvent type are in the message itself and in the span name's template.
    return {
        "messaging.system": "nats",
        "messaging.operation.type": operation,
        "messaging.destination.name": subject,
        "messaging.destination.template": template,
    }


def inject(headers: MutableMapping[str, str], span_context: SpanContext) -> None:
    """Write ``span_context`` as W3C ``traceparent`` (and ``tracestate``) into ``headers``.

    Formatted here rather than through the SDK's propagator, which costs several times more
    on the per-message path; the tests check both read each other's headers.
    """
    if not span_context.is_valid:
        return
    headers["traceparent"] = (
        f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}"
        f"-{span_context.trace_flags:02x}"
    )
    if span_context.trace_state:
        headers["tracestate"] = span_context.trace_state.to_header()


def extract(headers: Mapping[str, str]) -> Context | None:
    """The remote parent carried by W3C ``traceparent``/``tracestate``; None if absent/invalid.

    ``headers`` must have lower-case names.
    """
    value = headers.get("traceparent")
    if value is None:
        return None
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
    state = headers.get("tracestate")
    parent = SpanContext(
        trace_id=trace_id,
        span_id=span_id,
        is_remote=True,
        trace_flags=TraceFlags(flags & TraceFlags.SAMPLED),
        trace_state=TraceState.from_header([state]) if state else None,
    )
    return trace.set_span_in_context(NonRecordingSpan(parent))


def start_publish_span(
    tracer: Tracer, *, headers: MutableMapping[str, str], subject: str, template: str
) -> Span:
    """Start the PRODUCER span of a publish and write its context into ``headers``.

    The caller ends the span. It is not made current: nothing runs inside it but the publish.
    """
    span = tracer.start_span(f"publish {template}", kind=SpanKind.PRODUCER)
    if span.is_recording():
        span.set_attributes(
            _messaging_attributes(operation="send", subject=subject, template=template)
        )
    inject(headers, span.get_span_context())
    return span


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
