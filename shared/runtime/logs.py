"""Structured logging: one JSON object per line on stderr.

Every record carries time, level, logger, message and the service name; ``extra={...}`` fields
are merged in, and the current trace and span ids are added when a span is active so that logs
and traces join up.
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

import msgspec
from opentelemetry import trace

_RESERVED = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message",
    "asctime",
    "taskName",
}
# Values logged through ``extra`` may be of any type; unknown ones are written as their str().
_encoder = msgspec.json.Encoder(enc_hook=str)


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON line."""

    def __init__(self, *, service: str) -> None:
        super().__init__()
        self._service = service

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "service": self._service,
            "message": record.getMessage(),
        }
        span_context = trace.get_current_span().get_span_context()
        if span_context.is_valid:
            entry["trace_id"] = format(span_context.trace_id, "032x")
            entry["span_id"] = format(span_context.span_id, "016x")
        for key, value in record.__dict__.items():
            if key not in _RESERVED and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return _encoder.encode(entry).decode()


def configure_logging(*, service: str, level: str = "info", stream: TextIO | None = None) -> None:
    """Route every logger of the process to JSON lines on ``stream`` (stderr by default)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter(service=service))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Library chatter at info level drowns the service's own records.
    for noisy in ("aiohttp.access", "nats", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
