"""PRODUCER and CONSUMER spans around NATS messages, as the OpenTelemetry messaging conventions
name them: ``publish <subject template>`` around a publish, and ``process <subject template>``
around handling, whose parent is the producer context carried in ``traceparent``.

:class:`MessagingTracer` is what the bus keeps per tracer: it builds the spans through the fast
path (:mod:`shared.tracing.fastpath`) where the tracer allows it and through ``Tracer.start_span``
otherwise; :func:`start_publish_span` and :func:`start_process_span` always take the SDK's path.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.util.types import AnyValue

from shared.tracing.fastpath import fast_path
from shared.tracing.propagation import extract, format_traceparent, inject, parse_traceparent


def _messaging_attributes(
    *, operation: str, subject: str, template: str, consumer_group: str | None = None
) -> dict[str, AnyValue]:
    # Few attributes on purpose: they are set on every message. The message id and CloudEvent
    # type are in the message itself and in the span name's template.
    attributes: dict[str, AnyValue] = {
        "messaging.system": "nats",
        "messaging.operation.type": operation,
        "messaging.destination.name": subject,
        "messaging.destination.template": template,
    }
    if consumer_group:
        attributes["messaging.consumer.group.name"] = consumer_group
    return attributes


class MessagingTracer:
    """PRODUCER and CONSUMER spans of one tracer, at the least per-message cost.

    Spans are built by the fast path (:func:`shared.tracing.fastpath.fast_path`) with names
    made once per subject template; any other tracer (the API's no-op one, custom samplers)
    goes through ``Tracer.start_span``.
    """

    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer
        self._fast = fast_path(tracer)
        self._publish_names: dict[str, str] = {}
        self._process_names: dict[str, str] = {}

    @property
    def fast(self) -> bool:
        """Whether spans are built directly (see the class documentation)."""
        return self._fast is not None

    def start_publish(self, *, subject: str, template: str) -> tuple[Span, str | None, str | None]:
        """Start the PRODUCER span of a publish; returns it with its ``traceparent`` and
        ``tracestate`` header values (None where there is nothing to send).

        The caller ends the span. It is not made current: nothing runs inside it but the publish.
        """
        fast = self._fast
        if fast is None or not fast.enabled():
            headers: dict[str, str] = {}
            span = start_publish_span(
                self._tracer, headers=headers, subject=subject, template=template
            )
            return span, headers.get("traceparent"), headers.get("tracestate")
        current = trace.get_current_span().get_span_context()
        # The attributes are written out rather than built by _messaging_attributes: a call
        # with keywords per message is a measurable share of the fast path's cost.
        span = fast.start(
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
        fast = self._fast
        if fast is None or not fast.enabled():
            return start_process_span(
                self._tracer,
                headers=headers,
                subject=subject,
                template=template,
                consumer_group=consumer_group,
            )
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
        span = fast.start(
            self._process_names.get(template)
            or _remember(self._process_names, template, "process"),
            SpanKind.CONSUMER,
            parent,
            attributes,
        )
        return span, otel_context.attach(trace.set_span_in_context(span))


def _remember(names: dict[str, str], template: str, operation: str) -> str:
    name = names[template] = f"{operation} {template}"
    return name


def start_publish_span(
    tracer: Tracer, *, headers: MutableMapping[str, str], subject: str, template: str
) -> Span:
    """Start the PRODUCER span of a publish and write its context into ``headers``.

    The caller ends the span. It is not made current: nothing runs inside it but the publish.
    The per-message path keeps a :class:`MessagingTracer` instead.
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
        span.set_attributes(
            _messaging_attributes(
                operation="process",
                subject=subject,
                template=template,
                consumer_group=consumer_group,
            )
        )
    token = otel_context.attach(trace.set_span_in_context(span))
    return span, token


def end_process_span(span: Span, token: object) -> None:
    otel_context.detach(token)  # type: ignore[arg-type]
    span.end()


def mark_error(span: Span, exc: BaseException) -> None:
    span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR, str(exc)))
