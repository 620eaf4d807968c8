"""Decoding Kubernetes protobuf request bodies into the JSON form of the object.

kubectl's typed clients send protobuf for their imperative ``create`` commands (``kubectl
create configmap|secret|namespace|serviceaccount|deployment|job|role|clusterrole|rolebinding|
clusterrolebinding|poddisruptionbudget``); every other client sends JSON.

The body is the 4-byte magic ``k8s\\0`` and a ``runtime.Unknown`` message (typeMeta = 1,
raw = 2); ``raw`` is the object's own message, decoded here with the field tables of
``protobuf_messages``. Go writes every non-pointer field, zero or not: zero scalars of plain
fields are dropped (the JSON form omits them or the server defaults them), pointer fields
(``?`` kinds) are kept even when zero. A field the tables do not map must be zero; anything
else is refused (415, the client can send JSON) rather than silently dropped.
"""

from __future__ import annotations

import base64
from typing import Any

from sim.kubeapi.http.protobuf_messages import KINDS, Kind, Spec

MAGIC = b"k8s\x00"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"

Raw = int | bytes


class UnsupportedProtobufError(ValueError):
    """Not a protobuf body this server can decode."""


# -- wire format --------------------------------------------------------------------------------


def _varint(data: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if i >= len(data):
            raise UnsupportedProtobufError("truncated varint")
        byte = data[i]
        i += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, i


def _fields(data: bytes) -> list[tuple[int, Raw]]:
    out: list[tuple[int, Raw]] = []
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
            out.append((number, value))
        elif wire == 2:
            size, i = _varint(data, i)
            if i + size > len(data):
                raise UnsupportedProtobufError("truncated field")
            out.append((number, data[i : i + size]))
            i += size
        elif wire == 1:
            out.append((number, int.from_bytes(data[i : i + 8], "little")))
            i += 8
        elif wire == 5:
            out.append((number, int.from_bytes(data[i : i + 4], "little")))
            i += 4
        else:
            raise UnsupportedProtobufError(f"wire type {wire}")
    return out


def _signed(value: int) -> int:
    """Go writes negative int32/int64 values as 64-bit two's complement varints."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _is_zero(raw: Raw) -> bool:
    """A zero scalar, an empty string, or a message whose fields are all zero: what Go writes
    for fields that were never set."""
    if isinstance(raw, int):
        return raw == 0
    if not raw:
        return True
    try:
        return all(_is_zero(value) for _, value in _fields(raw))
    except UnsupportedProtobufError:
        return False


# -- decoding by table --------------------------------------------------------------------------

_ZERO: tuple[Any, ...] = ("", 0, False)


def _scalar(kind: str, raw: Raw, where: str) -> Any:
    base = kind.rstrip("?")
    if base == "string":
        if not isinstance(raw, bytes):
            raise UnsupportedProtobufError(f"{where}: expected bytes")
        return raw.decode()
    if base == "int":
        if not isinstance(raw, int):
            raise UnsupportedProtobufError(f"{where}: expected a varint")
        return _signed(raw)
    if base == "bool":
        return bool(raw)
    if base == "bytes":
        if not isinstance(raw, bytes):
            raise UnsupportedProtobufError(f"{where}: expected bytes")
        return base64.b64encode(raw).decode()
    if base == "quantity":  # resource.Quantity {string = 1}
        if not isinstance(raw, bytes):
            raise UnsupportedProtobufError(f"{where}: expected a Quantity")
        found = dict(_fields(raw)).get(1, b"")
        return found.decode() if isinstance(found, bytes) else ""
    if base == "int-or-string":  # intstr.IntOrString {type = 1, intVal = 2, strVal = 3}
        if not isinstance(raw, bytes):
            raise UnsupportedProtobufError(f"{where}: expected an IntOrString")
        parts = dict(_fields(raw))
        if parts.get(1, 0) == 1:
            text = parts.get(3, b"")
            return text.decode() if isinstance(text, bytes) else ""
        number = parts.get(2, 0)
        return _signed(number) if isinstance(number, int) else 0
    raise UnsupportedProtobufError(f"{where}: cannot decode {kind!r}")


def _value(kind: Kind, raw: Raw, where: str) -> Any:
    if isinstance(kind, str):
        return _scalar(kind, raw, where)
    if kind[0] in ("message", "message?"):
        if not isinstance(raw, bytes):
            raise UnsupportedProtobufError(f"{where}: expected a message")
        spec: Spec = kind[1]
        return _message(raw, spec, where)
    raise UnsupportedProtobufError(f"{where}: cannot decode {kind!r}")


def _keep(kind: Kind, value: Any) -> bool:
    """Whether a decoded single value belongs in the JSON form."""
    if isinstance(kind, str):
        return kind.endswith("?") or value not in _ZERO
    return kind[0] == "message?" or value != {}


def _map_entry(kind: Kind, raw: Raw, where: str) -> tuple[str, Any]:
    if not isinstance(raw, bytes):
        raise UnsupportedProtobufError(f"{where}: expected a map entry")
    pair = dict(_fields(raw))
    key = pair.get(1, b"")
    if not isinstance(key, bytes):
        raise UnsupportedProtobufError(f"{where}: expected a map key")
    value = pair.get(2, b"")
    return key.decode(), _value(kind, value, where)


def _message(data: bytes, spec: Spec, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, raw in _fields(data):
        entry = spec.get(number)
        here = f"{where}.{entry[0] if entry else number}"
        if entry is None:
            if not _is_zero(raw):
                raise UnsupportedProtobufError(f"{here}: field not decoded by this server")
            continue
        name, kind = entry
        if kind == "skip":
            continue
        if isinstance(kind, tuple) and kind[0] == "repeated":
            out.setdefault(name, []).append(_value(kind[1], raw, here))
        elif isinstance(kind, tuple) and kind[0] == "map":
            key, value = _map_entry(kind[1], raw, here)
            out.setdefault(name, {})[key] = value
        else:
            value = _value(kind, raw, here)
            if _keep(kind, value):
                out[name] = value
    return out


def decode(data: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object, or UnsupportedProtobufError."""
    if not data.startswith(MAGIC):
        raise UnsupportedProtobufError("missing the k8s protobuf magic")
    envelope = dict(_fields(data[len(MAGIC) :]))
    type_meta = envelope.get(1, b"")
    raw = envelope.get(2, b"")
    if not isinstance(type_meta, bytes) or not isinstance(raw, bytes):
        raise UnsupportedProtobufError("malformed envelope")
    meta = _message(type_meta, {1: ("apiVersion", "string"), 2: ("kind", "string")}, "TypeMeta")
    key = (meta.get("apiVersion", ""), meta.get("kind", ""))
    spec = KINDS.get(key)
    if spec is None:
        raise UnsupportedProtobufError(f"{key[1]} in {key[0]} is only accepted as JSON")
    return {"apiVersion": key[0], "kind": key[1], **_message(raw, spec, key[1])}
