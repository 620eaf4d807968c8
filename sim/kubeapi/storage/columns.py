"""Table columns of the served kinds: name, age, creation time and CRD printer columns.

Per-kind strategies and CRDs declare their columns here; ``reads.tables`` renders them.
"""

from __future__ import annotations

from typing import Any

from sim.kubeapi.machinery import codec, jsonpath
from sim.kubeapi.storage.resources import Column, Obj

NAME_DESCRIPTION = (
    "Name must be unique within a namespace. Is required when creating resources, although "
    "some resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
CREATED_DESCRIPTION = (
    "CreationTimestamp is a timestamp representing the server time when this object was "
    "created. It is not guaranteed to be set in happens-before order across separate "
    "operations. Clients may not set this value. It is represented in RFC3339 form and is in "
    "UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)


def human_duration(seconds: float) -> str:
    """The short ages kubectl shows (``45s``, ``3m12s``, ``5h``, ``12d``)."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def age(obj: Obj) -> str:
    created = (obj.get("metadata") or {}).get("creationTimestamp")
    if not created:
        return "<unknown>"
    delta = codec.now() - codec.parse_time(created)
    return human_duration(delta.total_seconds())


def since(timestamp: str | None) -> str:
    if not timestamp:
        return "<unknown>"
    return human_duration((codec.now() - codec.parse_time(timestamp)).total_seconds())


def name_column() -> Column:
    return Column(
        "Name", "string", lambda o: o["metadata"].get("name", ""), "name", NAME_DESCRIPTION
    )


def age_column() -> Column:
    return Column("Age", "string", age, "", CREATED_DESCRIPTION)


DEFAULT_COLUMNS = (
    name_column(),
    Column(
        "Created At",
        "date",
        lambda o: o["metadata"].get("creationTimestamp"),
        "",
        CREATED_DESCRIPTION,
    ),
)


def printer_column(spec: dict[str, Any]) -> Column:
    """A CRD ``additionalPrinterColumns`` entry as a table column."""
    steps = jsonpath.compile_path(spec.get("jsonPath", ""))
    kind = spec.get("type", "string")

    def cell(obj: Obj) -> Any:
        found = jsonpath.evaluate(steps, obj)
        if not found:
            return None
        value = found[0]
        if kind == "integer" and isinstance(value, int | float) and not isinstance(value, bool):
            return int(value)
        if kind == "number" and isinstance(value, int | float):
            return value
        if kind == "boolean" and isinstance(value, bool):
            return value
        if kind == "date":
            # The server renders dates as ages, as kubectl shows them.
            return since(value) if isinstance(value, str) else None
        if isinstance(value, str):
            return value
        return codec.encode(value).decode()

    return Column(
        spec.get("name", ""),
        kind,
        cell,
        spec.get("format", ""),
        spec.get("description", ""),
        int(spec.get("priority", 0)),
    )
