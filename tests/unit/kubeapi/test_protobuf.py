"""Protobuf request bodies: Go's zero-value rules, pointers, int-or-string, unmapped fields."""

from __future__ import annotations

import pytest

from sim.kubeapi.http import protobuf_decoder


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def number(field: int, value: int) -> bytes:
    return varint(field << 3) + varint(value)


def chunk(field: int, value: bytes | str) -> bytes:
    data = value.encode() if isinstance(value, str) else value
    return varint(field << 3 | 2) + varint(len(data)) + data


def envelope(api_version: str, kind: str, body: bytes) -> bytes:
    type_meta = chunk(1, api_version) + chunk(2, kind)
    return protobuf_decoder.MAGIC + chunk(1, type_meta) + chunk(2, body)


def meta(name: str) -> bytes:
    # Go writes every plain field, set or not: empty strings, a zero generation, an empty
    # creationTimestamp.
    return (
        chunk(1, name)
        + chunk(2, "")
        + chunk(3, "")
        + chunk(5, "")
        + chunk(6, "")
        + number(7, 0)
        + chunk(8, b"")
    )


def container(name: str, image: str, *extra: bytes) -> bytes:
    return chunk(1, name) + chunk(2, image) + chunk(5, "") + number(16, 0) + b"".join(extra)


def deployment(spec: bytes) -> bytes:
    status = number(1, 0) + number(2, 0)
    return envelope(
        "apps/v1", "Deployment", chunk(1, meta("web")) + chunk(2, spec) + chunk(3, status)
    )


def template(*containers: bytes, extra: bytes = b"") -> bytes:
    pod_spec = b"".join(chunk(2, c) for c in containers) + chunk(3, "") + number(11, 0) + extra
    return chunk(1, meta("")) + chunk(2, pod_spec)


def test_pointer_fields_keep_zero_and_plain_fields_drop_it() -> None:
    spec = number(1, 0) + number(5, 0) + chunk(3, template(container("c", "img")))
    decoded = protobuf_decoder.decode(deployment(spec))
    assert decoded == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 0,
            "template": {"spec": {"containers": [{"name": "c", "image": "img"}]}},
        },
    }


def test_negative_numbers_int_or_string_and_quantities() -> None:
    resources = chunk(2, chunk(1, "cpu") + chunk(2, chunk(1, "500m")))
    spec = chunk(
        3, template(container("c", "img", chunk(8, resources)), extra=number(25, -5))
    ) + chunk(
        4,
        chunk(1, "RollingUpdate")
        + chunk(2, chunk(1, number(1, 1) + chunk(3, "25%")) + chunk(2, number(2, 2))),
    )
    decoded = protobuf_decoder.decode(deployment(spec))
    pod = decoded["spec"]["template"]["spec"]
    assert pod["priority"] == -5
    assert pod["containers"][0]["resources"] == {"requests": {"cpu": "500m"}}
    assert decoded["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 2},
    }


def test_an_empty_pointer_message_is_kept() -> None:
    body = chunk(1, meta("budget")) + chunk(2, chunk(2, b""))
    decoded = protobuf_decoder.decode(envelope("policy/v1", "PodDisruptionBudget", body))
    assert decoded["spec"] == {"selector": {}}  # an empty selector selects every pod


def test_unmapped_fields_must_be_zero() -> None:
    zero = template(container("c", "img", chunk(99, b""), number(98, 0)))
    assert protobuf_decoder.decode(deployment(chunk(3, zero)))["spec"]["template"]
    # A livenessProbe (field 10) is not decoded: refused, not silently dropped.
    probe = container("c", "img", chunk(10, chunk(4, number(1, 5))))
    with pytest.raises(protobuf_decoder.UnsupportedProtobufError, match=r"containers\.10"):
        protobuf_decoder.decode(deployment(chunk(3, template(probe))))


def test_unknown_kinds_and_bad_bodies_are_refused() -> None:
    with pytest.raises(protobuf_decoder.UnsupportedProtobufError):
        protobuf_decoder.decode(envelope("v1", "Pod", chunk(1, meta("p"))))
    with pytest.raises(protobuf_decoder.UnsupportedProtobufError):
        protobuf_decoder.decode(b"{}")
    with pytest.raises(protobuf_decoder.UnsupportedProtobufError):
        protobuf_decoder.decode(protobuf_decoder.MAGIC + b"\x0a\x05ab")
