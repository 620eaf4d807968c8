"""The bus's PRODUCER/CONSUMER spans: built directly, they match what the SDK's tracer builds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    Decision,
    ParentBased,
    TraceIdRatioBased,
)
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    StatusCode,
    TraceFlags,
    TraceState,
)

from shared import tracing

SUBJECT = "cdo.v1.node.gb200-r1-n01.fault"
TEMPLATE = "cdo.v1.node.{node}.fault"


class Recorder:
    def __init__(self, **provider_options: object) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(
            resource=Resource.create({SERVICE_NAME: "test"}),
            **provider_options,  # type: ignore[arg-type]
        )
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("cdo-test", "1.2")
        self.spans = tracing.MessagingTracer(self.tracer)

    def finished(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    recorder = Recorder()
    assert recorder.spans.fast
    yield recorder
    recorder.provider.shutdown()


def publish(spans: tracing.MessagingTracer) -> dict[str, str]:
    span, traceparent, tracestate = spans.start_publish(subject=SUBJECT, template=TEMPLATE)
    span.end()
    headers = {"traceparent": traceparent} if traceparent else {}
    if tracestate:
        headers["tracestate"] = tracestate
    return headers


def process(spans: tracing.MessagingTracer, headers: dict[str, str], group: str | None = None):  # type: ignore[no-untyped-def]
    span, token = spans.start_process(
        headers=headers, subject=SUBJECT, template=TEMPLATE, consumer_group=group
    )
    current = trace.get_current_span()
    tracing.end_process_span(span, token)
    return span, current


def comparable(span: ReadableSpan) -> dict[str, object]:
    """Everything an exporter sends, except ids and times."""
    return {
        "name": span.name,
        "kind": span.kind,
        "attributes": dict(span.attributes or {}),
        "resource": dict(span.resource.attributes),
        "scope": span.instrumentation_scope,
        "status": span.status.status_code,
        "events": list(span.events),
        "links": list(span.links),
        "dropped": (span.dropped_attributes, span.dropped_events, span.dropped_links),
        "has_parent": span.parent is not None,
        "flags": span.context.trace_flags if span.context else None,
    }


def test_spans_match_those_the_sdk_tracer_builds(recorder: Recorder) -> None:
    headers = publish(recorder.spans)
    process(recorder.spans, headers, group="controllers")
    ours = recorder.finished()
    recorder.exporter.clear()

    sdk_headers: dict[str, str] = {}
    tracing.start_publish_span(
        recorder.tracer, headers=sdk_headers, subject=SUBJECT, template=TEMPLATE
    ).end()
    span, token = tracing.start_process_span(
        recorder.tracer,
        headers=sdk_headers,
        subject=SUBJECT,
        template=TEMPLATE,
        consumer_group="controllers",
    )
    tracing.end_process_span(span, token)
    theirs = recorder.finished()

    assert [comparable(s) for s in ours] == [comparable(s) for s in theirs]
    producer, consumer = ours
    assert producer.kind is SpanKind.PRODUCER and producer.name == f"publish {TEMPLATE}"
    assert consumer.kind is SpanKind.CONSUMER and consumer.name == f"process {TEMPLATE}"
    assert producer.start_time is not None and producer.end_time is not None
    assert producer.start_time <= producer.end_time
    assert consumer.attributes is not None
    assert consumer.attributes["messaging.consumer.group.name"] == "controllers"
    assert consumer.attributes["messaging.destination.name"] == SUBJECT


def test_consumer_is_a_child_of_the_producer_and_current_while_handling(
    recorder: Recorder,
) -> None:
    headers = publish(recorder.spans)
    span, current = process(recorder.spans, headers)
    assert current is span
    assert trace.get_current_span() is not span  # detached again
    producer, consumer = recorder.finished()
    assert producer.context is not None and consumer.context is not None
    assert consumer.parent is not None and consumer.parent.is_remote
    assert consumer.parent.span_id == producer.context.span_id
    assert consumer.context.trace_id == producer.context.trace_id
    parsed = tracing.parse_traceparent(headers["traceparent"])
    assert parsed is not None and parsed.span_id == producer.context.span_id
    assert parsed.trace_flags.sampled


def test_a_publish_inside_a_span_continues_its_trace(recorder: Recorder) -> None:
    with recorder.tracer.start_as_current_span("reconcile") as outer:
        publish(recorder.spans)
    producer = recorder.finished()[0]
    assert producer.parent is not None and not producer.parent.is_remote
    assert producer.parent.span_id == outer.get_span_context().span_id
    assert producer.context is not None
    assert producer.context.trace_id == outer.get_span_context().trace_id


def test_tracestate_travels_with_the_trace(recorder: Recorder) -> None:
    parent = SpanContext(
        trace_id=0x0AF7651916CD43DD8448EB211C80319C,
        span_id=0xB7AD6B7169203331,
        is_remote=False,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=TraceState([("vendor", "v1")]),
    )
    token = otel_context.attach(trace.set_span_in_context(NonRecordingSpan(parent)))
    try:
        headers = publish(recorder.spans)
    finally:
        otel_context.detach(token)
    assert headers["tracestate"] == "vendor=v1"
    process(recorder.spans, headers)
    consumer = recorder.finished()[1]
    assert consumer.context is not None
    assert consumer.context.trace_state.get("vendor") == "v1"


def test_a_parent_that_was_not_sampled_is_followed() -> None:
    recorder = Recorder()
    headers = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"}
    span, current = process(recorder.spans, headers)
    assert not span.is_recording() and current is span
    assert span.get_span_context().trace_id == 0x0AF7651916CD43DD8448EB211C80319C
    assert not span.get_span_context().trace_flags.sampled
    assert recorder.finished() == []


def test_always_off_records_nothing_but_keeps_the_trace_id() -> None:
    recorder = Recorder(sampler=ALWAYS_OFF)
    assert recorder.spans.fast
    headers = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    span, _ = process(recorder.spans, headers)
    assert not span.is_recording()
    assert span.get_span_context().trace_id == 0x0AF7651916CD43DD8448EB211C80319C
    out = publish(recorder.spans)
    assert out["traceparent"].endswith("-00") or out["traceparent"].endswith("-02")
    assert recorder.finished() == []


@pytest.mark.parametrize("sampler", [TraceIdRatioBased(0.5), ParentBased(TraceIdRatioBased(0.5))])
def test_ratio_sampling_decides_as_the_sampler_does(sampler: object) -> None:
    recorder = Recorder(sampler=sampler)
    assert recorder.spans.fast
    for _ in range(200):
        span, _, _ = recorder.spans.start_publish(subject=SUBJECT, template=TEMPLATE)
        context = span.get_span_context()
        span.end()
        expected = TraceIdRatioBased(0.5).should_sample(None, context.trace_id, "x").decision
        assert context.trace_flags.sampled == (expected is Decision.RECORD_AND_SAMPLE)
    sampled = len(recorder.finished())
    assert 0 < sampled < 200


def test_long_values_are_cut_to_the_attribute_length_limit() -> None:
    recorder = Recorder(span_limits=SpanLimits(max_span_attribute_length=12))
    assert recorder.spans.fast
    publish(recorder.spans)
    attributes = recorder.finished()[0].attributes
    assert attributes is not None
    assert attributes["messaging.destination.name"] == SUBJECT[:12]
    assert attributes["messaging.system"] == "nats"


def test_errors_and_attributes_set_by_handlers_are_recorded(recorder: Recorder) -> None:
    span, token = recorder.spans.start_process(headers={}, subject=SUBJECT, template=TEMPLATE)
    trace.get_current_span().set_attribute("cdo.extra", 7)
    tracing.mark_error(span, ValueError("boom"))
    linked = SpanContext(trace_id=5, span_id=6, is_remote=True)
    span.add_link(linked)
    tracing.end_process_span(span, token)
    other, other_token = recorder.spans.start_process(
        headers={}, subject=SUBJECT, template=TEMPLATE
    )
    tracing.end_process_span(other, other_token)
    consumer, untouched = recorder.finished()
    assert untouched.events == () and untouched.links == ()  # nothing leaked between spans
    assert [link.context for link in consumer.links] == [linked]
    assert consumer.parent is None  # no traceparent: a new trace
    assert consumer.attributes is not None and consumer.attributes["cdo.extra"] == 7
    assert consumer.status.status_code is StatusCode.ERROR
    assert [event.name for event in consumer.events] == ["exception"]


def test_other_samplers_and_tracers_take_the_sdk_path() -> None:
    custom = Recorder(sampler=ParentBased(ALWAYS_ON, remote_parent_not_sampled=ALWAYS_ON))
    assert not custom.spans.fast
    headers = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"}
    span, _ = process(custom.spans, headers)
    assert span.is_recording() is False  # already ended, but it was recorded:
    assert [s.name for s in custom.finished()] == [f"process {TEMPLATE}"]

    noop = tracing.MessagingTracer(trace.NoOpTracer())
    assert not noop.fast
    span, traceparent, _ = noop.start_publish(subject=SUBJECT, template=TEMPLATE)
    assert traceparent is None and not span.is_recording()


@pytest.mark.parametrize(
    "value",
    [
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331--1",
        "00--af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0x",
        "00-0af7651916cd43dd8448eb211c803-9c-b7ad6b7169203331-01",
    ],
)
def test_malformed_traceparent_of_the_usual_length_is_ignored(value: str) -> None:
    assert len(value) == 55
    assert tracing.parse_traceparent(value) is None
