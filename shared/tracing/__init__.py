"""OpenTelemetry for cdo services: one TracerProvider per service, W3C context in NATS headers
and in object annotations, messaging spans around every message.

The rooms:

- :mod:`shared.tracing.setup`: ``TracingSettings``, the TracerProvider and its OTLP export,
  whether a tracer's spans go anywhere (:func:`exports`);
- :mod:`shared.tracing.propagation`: ``traceparent`` formatting and parsing, inject/extract for
  message headers, and the trace context carried in object annotations;
- :mod:`shared.tracing.messaging`: PRODUCER and CONSUMER spans (:class:`MessagingTracer`);
- :mod:`shared.tracing.fastpath`: those spans built without ``Tracer.start_span``, the one
  module that relies on the SDK's private layout;
- :mod:`shared.tracing.story`: which trace work on a domain belongs to (``STORY_KEYS``) and
  the annotation patch that keeps it. Imported by its own name, not from here: it loads the
  CRD names, which most users of this package do without.

The names services use are re-exported here.
"""

from shared.tracing.messaging import (
    MessagingTracer,
    end_process_span,
    mark_error,
    start_process_span,
    start_publish_span,
)
from shared.tracing.propagation import (
    annotation_changes,
    annotations_for,
    context_from_annotations,
    current_trace_id,
    extract,
    format_traceparent,
    inject,
    is_traceparent,
    parse_traceparent,
    span_context_from_annotations,
)
from shared.tracing.setup import (
    INSTRUMENTATION_NAME,
    TracingSettings,
    export_configured,
    exports,
    setup_tracing,
)

__all__ = [
    "INSTRUMENTATION_NAME",
    "MessagingTracer",
    "TracingSettings",
    "annotation_changes",
    "annotations_for",
    "context_from_annotations",
    "current_trace_id",
    "end_process_span",
    "export_configured",
    "exports",
    "extract",
    "format_traceparent",
    "inject",
    "is_traceparent",
    "mark_error",
    "parse_traceparent",
    "setup_tracing",
    "span_context_from_annotations",
    "start_process_span",
    "start_publish_span",
]
