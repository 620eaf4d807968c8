"""Reading the few metadata fields key mapping needs, from any decoded API object.

Objects reach the controller core in two shapes: plain dicts as JSON decodes them (camelCase
names) and msgspec Structs declared with ``rename="camel"`` (snake_case attributes). Readers
here take the field's wire name and accept both, so mapping code need not know which one a
service chose.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from functools import lru_cache

_MISSING = object()
_UPPER = re.compile(r"(?<!^)(?=[A-Z])")


@lru_cache(maxsize=256)
def _attribute_name(wire_name: str) -> str:
    return _UPPER.sub("_", wire_name).lower()


def get_field(obj: object, wire_name: str) -> object | None:
    """``obj[wire_name]`` of a mapping, else its snake_case (or verbatim) attribute; or None."""
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(wire_name)
    value = getattr(obj, _attribute_name(wire_name), _MISSING)
    if value is _MISSING:
        value = getattr(obj, wire_name, None)
    return value


def get_str(obj: object, wire_name: str) -> str:
    """A string field, or "" when it is absent or not a string."""
    value = get_field(obj, wire_name)
    return value if isinstance(value, str) else ""


def metadata_str(obj: object, wire_name: str) -> str:
    """A string field of ``obj.metadata``, or ""."""
    return get_str(get_field(obj, "metadata"), wire_name)


def labels_of(obj: object) -> Mapping[str, object]:
    """``metadata.labels``, or an empty mapping."""
    labels = get_field(get_field(obj, "metadata"), "labels")
    return labels if isinstance(labels, Mapping) else {}


def owner_references_of(obj: object) -> Iterator[object]:
    """The entries of ``metadata.ownerReferences`` (mappings or Structs)."""
    refs = get_field(get_field(obj, "metadata"), "ownerReferences")
    if isinstance(refs, list | tuple):
        yield from refs
