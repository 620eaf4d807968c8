"""A service's TracerProvider: resource, sampler and OTLP export, and whether spans go anywhere.

Spans are exported over OTLP/HTTP when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or the traces-specific
variable) is set; the exporter reads the standard OTEL_* variables itself. Without an endpoint
spans are still created, so trace ids flow through headers and appear in logs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated

from msgspec import Meta
from opentelemetry.sdk import trace as sdk_trace
from opentelemetry.sdk.resources import SERVICE_INSTANCE_ID, SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, Sampler, TraceIdRatioBased
from opentelemetry.trace import Tracer

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


def exports(tracer: Tracer | None) -> bool:
    """Whether spans of ``tracer`` go anywhere: an SDK tracer with a span processor attached.

    Services write trace annotations only then, so that with tracing off no object changes.
    """
    if not isinstance(tracer, sdk_trace.Tracer):
        return False
    processors = getattr(tracer.span_processor, "_span_processors", None)
    # A processor of another shape than the SDK's own fan-out: assume it exports.
    return True if processors is None else bool(processors)
