"""Decoding the Kubernetes protobuf envelope for the few kinds kubectl's imperative
``create`` commands send that way (``kubectl create configmap|secret|namespace|
serviceaccount``); every other client uses JSON.

The envelope is the 4-byte magic ``k8s\\0`` followed by a ``runtime.Unknown`` message
(typeMeta = 1, raw = 2); ``raw`` is the object's own message. Only the fields those
commands fill are mapped; an unsupported kind is a 415, like any unknown media type.
"""

from __future__ import annotations

import base64
from typing import Any

MAGIC = b"k8s\x00"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"

Spec = dict[int, tuple[str, Any]]

_OWNER_REFERENCE: Spec = {
    1: ("kind", "string"),
    3: ("name", "string"),
    4: ("uid", "string"),
    5: ("apiVersion", "string"),
    6: ("controller", "bool"),
    7: ("blockOwnerDeletion", "bool"),
}
OBJECT_META: Spec = {
    1: ("name", "string"),
    2: ("generateName", "string"),
    3: ("namespace", "string"),
    5: ("uid", "string"),
    6: ("resourceVersion", "string"),
    7: ("generation", "int"),
    11: ("labels", "map"),
    12: ("annotations", "map"),
    13: ("ownerReferences", ("repeated", ("message", _OWNER_REFERENCE))),
    14: ("finalizers", ("repeated", "string")),
}
KINDS: dict[tuple[str, str], Spec] = {
    ("v1", "ConfigMap"): {
        1: ("metadata", ("message", OBJECT_META)),
        2: ("data", "map"),
        3: ("binaryData", "map-bytes"),
        4: ("immutable", "bool"),
    },
    ("v1", "Secret"): {
        1: ("metadata", ("message", OBJECT_META)),
        2: ("data", "map-bytes"),
        3: ("type", "string"),
        4: ("stringData", "map"),
        5: ("immutable", "bool"),
    },
    ("v1", "Namespace"): {
        1: ("metadata", ("message", OBJECT_META)),
        2: ("spec", ("message", {1: ("finalizers", ("repeated", "string"))})),
    },
    ("v1", "ServiceAccount"): {
        1: ("metadata", ("message", OBJECT_META)),
        3: ("imagePullSecrets", ("repeated", ("message", {1: ("name", "string")}))),
        4: ("automountServiceAccountToken", "bool"),
    },
}


class UnsupportedProtobufError(ValueError):
    """Not a protobuf body this server can decode."""


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


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    out: list[tuple[int, int | bytes]] = []
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
            out.append((number, value))
        elif wire == 2:
            size, i = _varint(data, i)
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


def _value(kind: Any, raw: int | bytes) -> Any:
    if kind == "string":
        return raw.decode() if isinstance(raw, bytes) else str(raw)
    if kind == "int":
        return int(raw) if isinstance(raw, int) else 0
    if kind == "bool":
        return bool(raw)
    if isinstance(kind, tuple) and kind[0] == "message" and isinstance(raw, bytes):
        return _message(raw, kind[1])
    raise UnsupportedProtobufError(f"cannot decode {kind!r}")


def _message(data: bytes, spec: Spec) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, raw in _fields(data):
        entry = spec.get(number)
        if entry is None:
            continue
        name, kind = entry
        if kind in ("map", "map-bytes") and isinstance(raw, bytes):
            pair = dict(_fields(raw))
            key = pair.get(1, b"")
            value = pair.get(2, b"")
            assert isinstance(key, bytes) and isinstance(value, bytes)
            decoded = base64.b64encode(value).decode() if kind == "map-bytes" else value.decode()
            out.setdefault(name, {})[key.decode()] = decoded
        elif isinstance(kind, tuple) and kind[0] == "repeated":
            out.setdefault(name, []).append(_value(kind[1], raw))
        else:
            value = _value(kind, raw)
            if value not in ("", 0, False, {}):
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
    meta = _message(type_meta, {1: ("apiVersion", "string"), 2: ("kind", "string")})
    key = (meta.get("apiVersion", ""), meta.get("kind", ""))
    spec = KINDS.get(key)
    if spec is None:
        raise UnsupportedProtobufError(f"{key[1]} in {key[0]} is only accepted as JSON")
    return {"apiVersion": key[0], "kind": key[1], **_message(raw, spec)}
