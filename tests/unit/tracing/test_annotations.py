"""Trace context carried in object annotations: reading and writing it."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from shared import tracing

KEY = "example.dev/trace-context"
OTHER = "example.dev/fault-trace-context"
DOMAIN = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
FAULT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def span_context(context: object) -> SpanContext:
    return trace.get_current_span(context).get_span_context()  # type: ignore[arg-type]


def test_a_span_written_as_an_annotation_parents_later_work() -> None:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("first") as first:
        annotations = tracing.annotations_for(first, key=KEY)
    parent = tracing.context_from_annotations(annotations, key=KEY)
    assert parent is not None
    with tracer.start_as_current_span("later", context=parent):
        pass
    first_span, later = exporter.get_finished_spans()
    assert later.context is not None and first_span.context is not None
    assert later.context.trace_id == first_span.context.trace_id
    assert later.parent is not None
    assert later.parent.span_id == first_span.context.span_id


def test_an_invalid_span_gives_no_annotation() -> None:
    assert tracing.annotations_for(NonRecordingSpan(SpanContext(0, 0, False)), key=KEY) == {}


def test_missing_or_malformed_annotations_give_no_parent() -> None:
    for carried in ({}, {KEY: ""}, {KEY: "not a traceparent"}, {OTHER: DOMAIN}):
        assert tracing.context_from_annotations(carried, key=KEY) is None


def test_the_annotation_keeps_the_sampling_decision() -> None:
    unsampled = DOMAIN[:-2] + "00"
    parent = tracing.span_context_from_annotations({KEY: unsampled}, key=KEY)
    assert parent is not None and parent.trace_flags == TraceFlags(0)


def test_only_a_provider_with_a_processor_exports() -> None:
    provider = TracerProvider()
    tracer = provider.get_tracer("t")
    assert not tracing.exports(tracer)
    assert not tracing.exports(None)
    assert not tracing.exports(trace.NoOpTracer())
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    assert tracing.exports(tracer)


def test_annotation_changes_name_only_what_differs() -> None:
    current = {KEY: DOMAIN, "someone.else/note": "x"}
    assert tracing.annotation_changes(current, {KEY: DOMAIN}) == {}
    assert tracing.annotation_changes(current, {KEY: FAULT}) == {KEY: FAULT}
    assert tracing.annotation_changes(current, {KEY: None}) == {KEY: None}
    assert tracing.annotation_changes(current, {OTHER: None}) == {}
    assert tracing.annotation_changes(current, {OTHER: FAULT}) == {OTHER: FAULT}
