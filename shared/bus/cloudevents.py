"""CloudEvents 1.0 in binary content mode over NATS headers.

The attributes travel as ``ce-*`` headers with ``content-type: application/json`` and the
event's JSON as the body, exactly as the CloudEvents HTTP binding lays them out, so any
CloudEvents SDK that reads or writes that binding interoperates. ``Nats-Msg-Id`` carries the
CloudEvent id so JetStream drops duplicates of one event.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from urllib.parse import quote, unquote

import msgspec

from shared.bus import wire
from shared.errors import MalformedEventError, UnknownEventTypeError
from shared.events.base import Event
from shared.events.registry import DECODERS, ENCODER, event_class

SPECVERSION = "1.0"
CONTENT_TYPE = "application/json"
MSG_ID_HEADER = "Nats-Msg-Id"

# Header values are percent-encoded like the HTTP binding does: printable ASCII except space,
# double quote and percent stays as is.
_SAFE_VALUE = re.compile(r"[!#-$&-~]*")
_SAFE_CHARS = "".join(c for c in map(chr, range(0x21, 0x7F)) if c not in ' "%')


def header_value(value: str) -> str:
    """``value`` percent-encoded where the HTTP binding requires it."""
    return value if _SAFE_VALUE.fullmatch(value) else quote(value, safe=_SAFE_CHARS)


def format_time(moment: datetime) -> str:
    """RFC 3339 with a ``Z`` for UTC, as CloudEvents writes ``time``."""
    text = moment.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def envelope_headers(*, ce_type: str, source_header: str, subject_header: str) -> dict[str, str]:
    """The binary-mode headers that stay the same for one event type, source and entity
    (``*_header`` already went through :func:`header_value`)."""
    return {
        "ce-specversion": SPECVERSION,
        "ce-source": source_header,
        "ce-type": ce_type,
        "ce-subject": subject_header,
        "content-type": CONTENT_TYPE,
    }


def binary_headers(
    event: Event, *, ce_type: str, source_header: str, subject_header: str
) -> dict[str, str]:
    """The binary-mode headers of ``event``: its envelope plus id and time."""
    headers = envelope_headers(
        ce_type=ce_type, source_header=source_header, subject_header=subject_header
    )
    headers["ce-id"] = header_value(event.id)
    headers["ce-time"] = format_time(event.time)
    headers[MSG_ID_HEADER] = event.id
    return headers


def event_header_lines(event: Event) -> str:
    """The header lines :func:`binary_headers` adds for ``event`` beyond its envelope (id,
    time, ``Nats-Msg-Id``), in the NATS wire form of :mod:`shared.bus.wire`."""
    ce_id = header_value(event.id)
    # An id that needed no percent-encoding is a trimmed run of printable ASCII already.
    msg_id = ce_id if ce_id == event.id else wire.safe_value(event.id)
    return f"ce-id: {ce_id}\r\nce-time: {format_time(event.time)}\r\n{MSG_ID_HEADER}: {msg_id}\r\n"


def encode(event: Event) -> tuple[dict[str, str], bytes]:
    """Headers and body of ``event`` in binary content mode."""
    headers = binary_headers(
        event,
        ce_type=event.ce_type(),
        source_header=header_value(event.source),
        subject_header=header_value(event.ce_subject()),
    )
    return headers, ENCODER.encode(event)


def lowercase_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    """Header names compared case-insensitively, as the bindings require."""
    if not headers:
        return {}
    return dict(zip(map(str.lower, headers), headers.values(), strict=True))


def decode(headers: Mapping[str, str], body: bytes) -> Event:
    """The event in a binary-mode message; ``headers`` must have lower-case names.

    Raises MalformedEventError (with a metric reason) or UnknownEventTypeError. Header
    attributes win over the same fields in the body.
    """
    if not headers:
        raise MalformedEventError("message has no headers", reason="missing_header")
    specversion = headers.get("ce-specversion")
    if specversion != SPECVERSION:
        raise MalformedEventError(
            f"ce-specversion is {specversion!r}, expected {SPECVERSION!r}",
            reason="missing_header" if specversion is None else "specversion",
        )
    ce_type = headers.get("ce-type")
    if not (headers.get("ce-id") and headers.get("ce-source") and ce_type):
        missing = [name for name in ("ce-id", "ce-source", "ce-type") if not headers.get(name)]
        raise MalformedEventError(
            f"missing header(s) {', '.join(missing)}", reason="missing_header"
        )
    cls = event_class(ce_type)
    if cls is None:
        raise UnknownEventTypeError(f"unknown ce-type {ce_type!r}")
    content_type = headers.get("content-type", CONTENT_TYPE)
    if (
        content_type != CONTENT_TYPE
        and content_type.split(";", 1)[0].strip().lower() != CONTENT_TYPE
    ):
        raise MalformedEventError(
            f"content-type {content_type!r} is not JSON", reason="content_type"
        )
    try:
        event = DECODERS[cls].decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise MalformedEventError(f"{ce_type}: {exc}") from exc
    ce_id = unquote(headers["ce-id"])
    ce_source = unquote(headers["ce-source"])
    if event.id == ce_id and event.source == ce_source:
        # The body carries the same envelope, as cdo's own producers write it: nothing to merge.
        return event
    moment = event.time
    ce_time = headers.get("ce-time")
    if ce_time:
        try:
            moment = datetime.fromisoformat(unquote(ce_time))
        except ValueError as exc:
            raise MalformedEventError(
                f"ce-time {ce_time!r}: {exc}", reason="malformed_header"
            ) from exc
    return msgspec.structs.replace(event, id=ce_id, source=ce_source, time=moment)
