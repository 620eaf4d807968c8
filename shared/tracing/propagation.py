"""W3C Trace Context in and out of cdo's carriers: NATS message headers and object annotations.

A context travels as a W3C ``traceparent`` value (and ``tracestate`` in headers). The values are
formatted and parsed here rather than through the SDK's propagator, which costs several times
more on the per-message path; the tests check both read each other's headers.

Work that a watch event starts has no message headers to take a parent from, so the objects a
story runs through carry the context in an annotation instead. The annotation names are API and
live in ``shared.crds.names``; they are arguments here because importing the CRD package would
make this module, which every service loads, far heavier.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext, TraceFlags, TraceState

FLAGS = tuple(TraceFlags(flags) for flags in range(4))
"""The TraceFlags values a version-00 context can carry, made once instead of per span."""


def format_traceparent(span_context: SpanContext) -> str:
    return (
        f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}"
        f"-{span_context.trace_flags:02x}"
    )


def inject(headers: MutableMapping[str, str], span_context: SpanContext) -> None:
    """Write ``span_context`` as W3C ``traceparent`` (and ``tracestate``) into ``headers``."""
    if not span_context.is_valid:
        return
    headers["traceparent"] = format_traceparent(span_context)
    if span_context.trace_state:
        headers["tracestate"] = span_context.trace_state.to_header()


def _remote(trace_id: int, span_id: int, flags: int, state: str | None) -> SpanContext:
    return SpanContext(
        trace_id=trace_id,
        span_id=span_id,
        is_remote=True,
        trace_flags=FLAGS[flags & TraceFlags.SAMPLED],
        trace_state=TraceState.from_header([state]) if state else None,
    )


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
        return _remote(trace_id, span_id, flags, state)
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
    return _remote(trace_id, span_id, flags, state)


def is_traceparent(value: str | None) -> bool:
    """Whether ``value`` is a valid W3C ``traceparent`` (None and "" are not)."""
    return bool(value) and parse_traceparent(value or "") is not None


def extract(headers: Mapping[str, str]) -> Context | None:
    """The remote parent carried by W3C ``traceparent``/``tracestate``; None if absent/invalid.

    ``headers`` must have lower-case names.
    """
    value = headers.get("traceparent")
    if value is None:
        return None
    parent = parse_traceparent(value, headers.get("tracestate"))
    return None if parent is None else trace.set_span_in_context(NonRecordingSpan(parent))


def current_trace_id() -> str | None:
    """The current trace id in hex, or None outside a span."""
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


# -- trace context carried on API objects ---------------------------------------------------


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
