"""W3C trace context: cdo's fast codec and the OpenTelemetry propagator read each other."""

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.trace import SpanKind, TraceState
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from shared import tracing

PROPAGATOR = TraceContextTextMapPropagator()


def remote(context: object) -> trace.SpanContext:
    return trace.get_current_span(context).get_span_context()  # type: ignore[arg-type]


def test_our_headers_read_by_the_sdk_propagator() -> None:
    tracer = TracerProvider().get_tracer("t")
    headers: dict[str, str] = {}
    span = tracing.start_publish_span(tracer, headers=headers, subject="cdo.v1.x", template="t")
    span.end()
    extracted = remote(PROPAGATOR.extract(headers))
    assert extracted.trace_id == span.get_span_context().trace_id
    assert extracted.span_id == span.get_span_context().span_id
    assert extracted.trace_flags.sampled


def test_sdk_headers_read_by_our_extract() -> None:
    tracer = TracerProvider().get_tracer("t")
    with tracer.start_as_current_span("p", kind=SpanKind.PRODUCER) as span:
        headers: dict[str, str] = {}
        ctx = trace.set_span_in_context(
            trace.NonRecordingSpan(
                trace.SpanContext(
                    trace_id=span.get_span_context().trace_id,
                    span_id=span.get_span_context().span_id,
                    is_remote=False,
                    trace_flags=span.get_span_context().trace_flags,
                    trace_state=TraceState([("vendor", "v1")]),
                )
            )
        )
        PROPAGATOR.inject(headers, context=ctx)
    parsed = remote(tracing.extract(headers))
    assert parsed.trace_id == span.get_span_context().trace_id
    assert parsed.is_remote
    assert parsed.trace_state.get("vendor") == "v1"


def test_consumer_span_is_child_of_producer() -> None:
    tracer = TracerProvider().get_tracer("t")
    headers: dict[str, str] = {}
    producer = tracing.start_publish_span(tracer, headers=headers, subject="s", template="t")
    producer.end()
    consumer, token = tracing.start_process_span(tracer, headers=headers, subject="s", template="t")
    try:
        assert trace.get_current_span() is consumer
    finally:
        tracing.end_process_span(consumer, token)
    assert isinstance(consumer, ReadableSpan)
    assert consumer.parent is not None
    assert consumer.parent.span_id == producer.get_span_context().span_id
    assert consumer.get_span_context().trace_id == producer.get_span_context().trace_id


@pytest.mark.parametrize(
    "value",
    [
        "garbage",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
        "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319z-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
    ],
)
def test_invalid_traceparent_is_ignored(value: str) -> None:
    assert tracing.extract({"traceparent": value}) is None
    assert not remote(PROPAGATOR.extract({"traceparent": value})).is_valid


def test_future_versions_with_more_fields_are_read() -> None:
    value = "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-more"
    assert remote(tracing.extract({"traceparent": value})).span_id == 0xB7AD6B7169203331
