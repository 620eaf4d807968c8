"""What the messaging fast path relies on in the OpenTelemetry SDK, asserted one by one.

:mod:`shared.tracing.fastpath` reads private fields of the SDK's tracer and samplers and builds
``sdk.trace.Span`` objects field by field. When an SDK upgrade changes any of that, the fast path
either falls back to ``Tracer.start_span`` (slower, silently) or builds spans that export
differently; each test here fails first and names the piece that moved.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk import trace as sdk_trace
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
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags

from shared.tracing.fastpath import (
    ATTRIBUTES_PER_SPAN,
    FastPath,
    MessagingSpan,
    fast_path,
    sampling_plan,
    span_fields_match,
)

ATTRIBUTES = {
    "messaging.system": "nats",
    "messaging.operation.type": "process",
    "messaging.destination.name": "cdo.v1.node.n1.fault",
    "messaging.destination.template": "cdo.v1.node.{node}.fault",
    "messaging.consumer.group.name": "controllers",
}
PARENT = SpanContext(
    trace_id=0x0AF7651916CD43DD8448EB211C80319C,
    span_id=0xB7AD6B7169203331,
    is_remote=True,
    trace_flags=TraceFlags(TraceFlags.SAMPLED),
)


@pytest.fixture
def provider() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: "test"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def sdk_tracer(provider: TracerProvider) -> sdk_trace.Tracer:
    tracer = provider.get_tracer("cdo-test", "1.2")
    assert isinstance(tracer, sdk_trace.Tracer)
    return tracer


def test_the_default_sdk_tracer_takes_the_fast_path(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    assert fast_path(sdk_tracer(provider[0])) is not None


def test_the_tracer_fields_read_are_there(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    tracer = sdk_tracer(provider[0])
    assert isinstance(tracer._span_limits, SpanLimits)
    assert isinstance(tracer._instrumentation_scope, InstrumentationScope)
    assert tracer._instrumentation_scope.name == "cdo-test"
    assert tracer.instrumentation_info is not None
    assert tracer.resource.attributes[SERVICE_NAME] == "test"
    assert callable(tracer.id_generator.generate_trace_id)
    assert callable(tracer.id_generator.generate_span_id)
    on_start = inspect.signature(tracer.span_processor.on_start)
    assert "parent_context" in on_start.parameters
    # Optional in older SDKs; where present, the fast path needs them in this shape.
    metrics = getattr(tracer, "_tracer_metrics", None)
    assert metrics is None or type(metrics).__name__ == "NoOpTracerMetrics"
    enabled = getattr(tracer, "_is_enabled", None)
    assert enabled is None or enabled() is True


def test_parent_based_delegates_are_where_the_plan_reads_them() -> None:
    ratio = TraceIdRatioBased(0.25)
    sampler = ParentBased(ratio)
    assert sampler._root is ratio
    assert (
        sampler._remote_parent_sampled,
        sampler._remote_parent_not_sampled,
        sampler._local_parent_sampled,
        sampler._local_parent_not_sampled,
    ) == (ALWAYS_ON, ALWAYS_OFF, ALWAYS_ON, ALWAYS_OFF)
    assert sampling_plan(sampler) == (True, ratio.bound)
    assert sampling_plan(ParentBased(ALWAYS_ON)) == (True, 1 << 64)
    assert sampling_plan(ALWAYS_OFF) == (False, 0)


def test_the_ratio_bound_decides_as_the_sampler_does() -> None:
    sampler = TraceIdRatioBased(0.5)
    for trace_id in range(1, 1 << 64, (1 << 64) // 997):
        inline = (trace_id & TraceIdRatioBased.TRACE_ID_LIMIT) < sampler.bound
        decision = sampler.should_sample(None, trace_id, "x").decision
        assert inline == (decision is Decision.RECORD_AND_SAMPLE)


def test_the_sdk_span_constructor_takes_what_the_field_probe_passes() -> None:
    parameters = inspect.signature(sdk_trace._Span.__init__).parameters
    for name in ("name", "context", "resource", "limits", "instrumentation_scope"):
        assert name in parameters
    assert issubclass(sdk_trace._Span, sdk_trace.Span)


def test_a_messaging_span_has_exactly_the_fields_of_an_sdk_span(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    tracer = sdk_tracer(provider[0])
    assert span_fields_match(tracer)
    attributes = BoundedAttributes(tracer._span_limits.max_span_attributes, immutable=False)
    span = MessagingSpan(tracer, "probe", SpanKind.CONSUMER, PARENT, None, attributes)
    reference = sdk_trace._Span("probe", PARENT, resource=tracer.resource)
    assert set(vars(span)) == set(vars(reference))


def test_events_and_links_go_through_the_hooks_it_overrides(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    # The spans share one empty list until their first event or link; if the SDK stopped
    # routing add_event/add_link through _add_event/_add_link, they would be lost in it.
    tracer_provider, exporter = provider
    fast = fast_path(sdk_tracer(tracer_provider))
    assert fast is not None
    busy = fast.start("process t", SpanKind.CONSUMER, None, dict(ATTRIBUTES))
    quiet = fast.start("process t", SpanKind.CONSUMER, None, dict(ATTRIBUTES))
    busy.add_event("handled")
    busy.add_link(PARENT)
    busy.end()
    quiet.end()
    first, second = exporter.get_finished_spans()
    assert [event.name for event in first.events] == ["handled"]
    assert [link.context for link in first.links] == [PARENT]
    assert second.events == () and second.links == ()


def test_bounded_attributes_read_a_dict_set_in_place() -> None:
    bounded = BoundedAttributes(ATTRIBUTES_PER_SPAN + 1, immutable=False, max_value_len=None)
    assert isinstance(bounded._dict, dict)
    bounded._dict = dict(ATTRIBUTES)
    assert dict(bounded) == ATTRIBUTES and len(bounded) == ATTRIBUTES_PER_SPAN
    bounded["cdo.extra"] = 7
    bounded["cdo.more"] = 8  # one past maxlen: the oldest is dropped and counted
    assert bounded.dropped == 1 and bounded["cdo.more"] == 8


def exported(span: ReadableSpan) -> ExportTraceServiceRequest:
    """The OTLP request for ``span``, without what differs between any two spans: ids, times."""
    request = encode_spans([span])
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for encoded in scope_spans.spans:
                encoded.span_id = b""
                encoded.start_time_unix_nano = encoded.end_time_unix_nano = 0
                for event in encoded.events:
                    event.time_unix_nano = 0
    return request


def test_a_fast_span_exports_as_an_sdk_span_does(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    tracer_provider, exporter = provider
    tracer = sdk_tracer(tracer_provider)
    fast = fast_path(tracer)
    assert isinstance(fast, FastPath)
    linked = SpanContext(trace_id=5, span_id=6, is_remote=True)
    ours = fast.start("process t", SpanKind.CONSUMER, PARENT, dict(ATTRIBUTES))
    theirs = tracer.start_span(
        "process t",
        context=trace.set_span_in_context(NonRecordingSpan(PARENT)),
        kind=SpanKind.CONSUMER,
        attributes=ATTRIBUTES,
    )
    for span in (ours, theirs):
        span.set_attribute("cdo.extra", 7)
        span.add_link(linked)
        # Ended by the span's own __exit__: it records the exception and sets the status as
        # the span's flags say, so those fields are compared too.
        with pytest.raises(ValueError, match="boom"), span:
            raise ValueError("boom")
    first, second = exporter.get_finished_spans()
    assert type(first) is type(second)
    assert exported(first) == exported(second)
    assert exported(first).resource_spans[0].scope_spans[0].spans[0].trace_id
