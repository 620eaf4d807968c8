"""NATS message headers on the wire: the ``NATS/1.0`` header block, written and read.

nats-py writes a header block from a dict, validating and encoding each header one by one, and
parses every received block line by line with per-character checks. For a CloudEvent's nine
headers that is most of the client's per-message cost on both sides, so the bus writes the
block of its events itself (the headers that stay the same for an event type and entity are
encoded once) and reads blocks with :func:`parse_header_lines`, whose result is the same as
nats-py's own parser for any input (the tests compare both on generated blocks).

Writing follows nats-py's rules: names are HTTP tokens, values are trimmed and carry no CR or
LF, so a value can never end the header block early.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

HEADER_LINE = b"NATS/1.0\r\n"
"""The first line of every header block (no inline status)."""
END = b"\r\n"
"""The empty line that closes a header block."""

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_TOKEN_CHARS = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]*")
_NEWLINES = str.maketrans({"\r": " ", "\n": " "})
_BYTES_WHITESPACE = " \t\n\r\x0b\x0c"
"""What ``bytes.strip`` removes, the trimming nats-py applies to received names and values."""


def header_line(name: str, value: str) -> str:
    """One ``Name: value`` line, with its CRLF. Raises ValueError for a name that is not a
    token; the value is trimmed and CR/LF in it become spaces."""
    name = name.strip()
    if not _TOKEN.fullmatch(name):
        raise ValueError(f"header name {name!r} is not an HTTP token")
    return f"{name}: {safe_value(value)}\r\n"


def header_lines(headers: Mapping[str, str]) -> bytes:
    """The lines of ``headers`` (no first line, no closing empty line); empty names skipped."""
    lines = (header_line(name, value) for name, value in headers.items() if name.strip())
    return "".join(lines).encode()


def header_block(headers: Mapping[str, str]) -> bytes:
    """The whole header block of ``headers``, as nats-py would send it."""
    return HEADER_LINE + header_lines(headers) + END


def safe_value(value: str) -> str:
    """``value`` as :func:`header_line` would write it (trimmed, no CR/LF)."""
    return value.strip().translate(_NEWLINES)


def parse_header_lines(raw: bytes, fallback: Callable[[bytes], dict[str, str]]) -> dict[str, str]:
    """The headers in ``raw`` (the block after its first line), exactly as ``fallback`` (nats-py's
    parser) reads them.

    Blocks in the canonical form every NATS client writes (``Name: value`` lines, one space
    after the colon, no whitespace at either end of a value, one closing empty line) are split
    in one pass; anything else (folded or padded lines, bad names, invalid UTF-8 in a name) is
    left to ``fallback``.
    """
    text = raw.decode("utf-8", "replace")
    if text[-4:] != "\r\n\r\n":
        return fallback(raw)
    try:
        headers = dict([line.split(": ", 1) for line in text[:-4].split("\r\n")])
    except ValueError:  # a line without ": " or an empty line in the middle
        return fallback(raw)
    if _TOKEN_CHARS.fullmatch("".join(headers)) is None:
        return fallback(raw)
    for value in headers.values():
        if value != value.strip(_BYTES_WHITESPACE):
            return fallback(raw)
    return headers
