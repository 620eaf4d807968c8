"""NATS header blocks written and read by the bus, compared with nats-py's own code."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from nats.aio.client import Client

from shared.bus import client, wire
from shared.bus import cloudevents as ce
from shared.events import NodeRecovered

NATS_PARSE = Client._parse_header_lines

_TOKEN_ALPHABET = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
names = st.text(alphabet=_TOKEN_ALPHABET, min_size=1, max_size=12)
values = st.text(max_size=24)
canonical_lines = st.builds(
    lambda name, value: f"{name}: {value.strip()}".encode(),
    names,
    values.filter(lambda v: "\r" not in v and "\n" not in v),
)
messy_lines = st.binary(max_size=24) | st.sampled_from(
    [b"", b" a: b", b"a:b", b"a :b", b"a:  b", b"a: b ", b"a: b\t", b"a:b: c", b": x", b"\xff: x",
     b"a: \xe2\x82", b"a\tb: c", b"a: b\nc", b"a: \x1cb\x1c", b"a b: c", b"a: \r", b"A: 1"]
)  # fmt: skip


@st.composite
def header_blocks(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(canonical_lines | messy_lines, max_size=8))
    ending = draw(st.sampled_from([b"\r\n\r\n", b"\r\n", b"", b"\r\n\r\n\r\n"]))
    return b"\r\n".join(lines) + ending


@given(header_blocks())
@example(b"ce-id: 1\r\nce-type: t\r\n\r\n")
@example(b"a: 1\r\n\r\nb: 2\r\n\r\n")
@example(b"a: x\r\na: y\r\n\r\n")
def test_reading_a_block_gives_what_nats_py_reads(raw: bytes) -> None:
    assert wire.parse_header_lines(raw, NATS_PARSE) == NATS_PARSE(raw)


@given(st.dictionaries(names, values, max_size=6))
def test_a_written_block_reads_back_as_nats_py_would_send_it(headers: dict[str, str]) -> None:
    block = wire.header_block(headers)
    assert block.startswith(wire.HEADER_LINE)
    assert block.endswith(b"\r\n\r\n") or block == wire.HEADER_LINE + wire.END
    expected = {name: wire.safe_value(value) for name, value in headers.items()}
    assert client.parse_block(block) == expected


def test_a_header_name_that_is_not_a_token_is_refused() -> None:
    with pytest.raises(ValueError, match="'bad name'"):
        wire.header_block({"bad name": "x"})


@given(st.text(min_size=1, max_size=30))
@example(" padded id ")
@example("id\r\nInjected: yes")
@example("100%")
def test_the_event_lines_match_the_binary_mode_headers(event_id: str) -> None:
    event = NodeRecovered(node="gb200-r1-n01", id=event_id, source="cdo/test/1")
    envelope = ce.envelope_headers(
        ce_type=event.ce_type(),
        source_header=ce.header_value(event.source),
        subject_header=ce.header_value(event.ce_subject()),
    )
    block = (
        wire.HEADER_LINE
        + wire.header_lines(envelope)
        + ce.event_header_lines(event).encode()
        + wire.END
    )
    headers = ce.binary_headers(
        event,
        ce_type=event.ce_type(),
        source_header=ce.header_value(event.source),
        subject_header=ce.header_value(event.ce_subject()),
    )
    assert client.parse_block(block) == {k: wire.safe_value(v) for k, v in headers.items()}
    assert ce.decode(ce.lowercase_headers(client.parse_block(block)), ce.encode(event)[1]) == event


def test_the_installed_nats_py_takes_the_prepared_path() -> None:
    # If a nats-py upgrade changes the internals the bus hooks into, the bus still works
    # (dict headers), but this fails so that the faster path is not lost silently.
    assert client.PREPARED_PUBLISH
    assert client.BusClient._parse_header_lines is not Client._parse_header_lines
