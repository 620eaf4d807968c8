"""NATS subjects and snapshot keys: the one place they are built.

Kubernetes names and clique ids contain dots, and a dot separates NATS subject tokens, so every
token is escaped: characters outside ``[A-Za-z0-9_-]`` become ``=XX`` (the UTF-8 bytes in upper
hex). The result is valid both in a subject and in a JetStream KV key, and it is reversible::

    escape_token("gb200-r1-n01.example.com") == "gb200-r1-n01=2Eexample=2Ecom"

A SubjectTemplate names its tokens in braces, e.g. ``cdo.v1.node.{node}.fault``. The template
string itself is what spans and metrics use, so their names stay low-cardinality.
"""

from __future__ import annotations

import re
from typing import Any

SUBJECT_ROOT = "cdo.v1"
"""Every cdo event subject starts with this; the JetStream stream captures ``cdo.v1.>``."""

_PLAIN = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_ALL_PLAIN = re.compile(r"[A-Za-z0-9_-]+")
_ESCAPED = re.compile(r"(?:=[0-9A-F]{2})+")
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


def escape_token(value: str) -> str:
    """Make ``value`` safe as one subject token or KV key segment (reversibly)."""
    if _ALL_PLAIN.fullmatch(value):
        return value
    if not value:
        raise ValueError("a subject token cannot be empty")
    return "".join(chr(byte) if byte in _PLAIN else f"={byte:02X}" for byte in value.encode())


def unescape_token(token: str) -> str:
    """Inverse of :func:`escape_token`."""
    if "=" not in token:
        return token
    return _ESCAPED.sub(lambda m: bytes.fromhex(m.group(0).replace("=", "")).decode(), token)


class SubjectTemplate:
    """A dotted subject (or KV key) with named, escaped tokens."""

    __slots__ = ("_parts", "fields", "template")

    def __init__(self, template: str) -> None:
        self.template = template
        self._parts = template.split(".")
        self.fields: tuple[str, ...] = tuple(_PLACEHOLDER.findall(template))
        for part in self._parts:
            if "{" in part and not _PLACEHOLDER.fullmatch(part):
                raise ValueError(f"a placeholder must fill a whole token: {template!r}")

    def __repr__(self) -> str:
        return f"SubjectTemplate({self.template!r})"

    def render(self, **tokens: str) -> str:
        """The concrete subject for ``tokens`` (each escaped)."""
        return ".".join(
            escape_token(tokens[part[1:-1]]) if part.startswith("{") else part
            for part in self._parts
        )

    def render_for(self, obj: Any) -> str:
        """The concrete subject for an object whose attributes are named like the tokens."""
        return self.render(**{name: str(getattr(obj, name)) for name in self.fields})

    def wildcard(self, **fixed: str) -> str:
        """A subscription pattern: tokens given in ``fixed`` are escaped, the others are ``*``."""
        return ".".join(
            (escape_token(fixed[part[1:-1]]) if part[1:-1] in fixed else "*")
            if part.startswith("{")
            else part
            for part in self._parts
        )

    def parse(self, subject: str) -> dict[str, str] | None:
        """The tokens of ``subject`` if it matches this template, else None."""
        parts = subject.split(".")
        if len(parts) != len(self._parts):
            return None
        tokens: dict[str, str] = {}
        for want, got in zip(self._parts, parts, strict=True):
            if want.startswith("{"):
                tokens[want[1:-1]] = unescape_token(got)
            elif want != got:
                return None
        return tokens


DOMAIN_MEMBERSHIP = SubjectTemplate(SUBJECT_ROOT + ".domain.{namespace}.{name}.membership")
CLIQUE_CAPACITY = SubjectTemplate(SUBJECT_ROOT + ".clique.{clique}.capacity")
NODE_FAULT = SubjectTemplate(SUBJECT_ROOT + ".node.{node}.fault")
NODE_RECOVERED = SubjectTemplate(SUBJECT_ROOT + ".node.{node}.recovered")
NODE_IMEX = SubjectTemplate(SUBJECT_ROOT + ".node.{node}.imex")

# Snapshot keys in the KV bucket: the latest state of one domain, clique or node aspect.
DOMAIN_SNAPSHOT = SubjectTemplate("v1.domain.{namespace}.{name}")
CLIQUE_SNAPSHOT = SubjectTemplate("v1.clique.{clique}")
NODE_HEALTH_SNAPSHOT = SubjectTemplate("v1.node.{node}.health")
NODE_IMEX_SNAPSHOT = SubjectTemplate("v1.node.{node}.imex")

ALL_EVENTS = SUBJECT_ROOT + ".>"
"""Pattern matching every cdo event subject."""
