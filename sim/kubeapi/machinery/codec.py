"""JSON and YAML coding for API objects, plus the time formats the API uses.

Objects travel through the emulator as plain ``dict``/``list`` trees (what the
API calls "unstructured" content) and rest in the store as encoded JSON bytes,
so one msgspec encoder and decoder serve every kind.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, TypeVar

import msgspec
import yaml

JSON = Any
T = TypeVar("T")
"""A decoded JSON value: dict, list, str, int, float, bool or None."""

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()


class DecodeError(ValueError):
    """The request body was not valid JSON or YAML."""


def encode(value: JSON) -> bytes:
    """Encode a JSON tree to compact bytes."""
    return _encoder.encode(value)


def decode(data: bytes | str) -> JSON:
    """Decode JSON bytes; raises DecodeError with msgspec's message."""
    try:
        return _decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise DecodeError(str(exc)) from exc


def decode_yaml(data: bytes | str) -> JSON:
    """Decode YAML (a superset of JSON), as apply-patch bodies are sent."""
    try:
        return yaml.safe_load(data)
    except yaml.YAMLError as exc:
        raise DecodeError(str(exc)) from exc


def copy(value: T) -> T:
    """Deep copy of a JSON tree (an encode/decode round trip is the fastest way)."""
    result: T = _decoder.decode(_encoder.encode(value))
    return result


def now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


def format_time(moment: _dt.datetime) -> str:
    """metav1.Time: RFC 3339 at second precision, always UTC with a ``Z``."""
    return moment.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(moment: _dt.datetime) -> str:
    """metav1.MicroTime: RFC 3339 with six fractional digits."""
    return moment.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> _dt.datetime:
    """Parse an RFC 3339 timestamp as the API writes it."""
    return _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
