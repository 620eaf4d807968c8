"""Server-side table output (``Accept: application/json;as=Table;g=meta.k8s.io;v=v1``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sim.kubeapi.storage.columns import DEFAULT_COLUMNS, name_column
from sim.kubeapi.storage.resources import Column, Obj, ResourceType


def columns_for(rt: ResourceType) -> tuple[Column, ...]:
    if rt.printer_columns is not None:
        return (name_column(), *rt.printer_columns)
    builtin = rt.strategy.columns()
    if builtin is not None:
        return tuple(builtin)
    return DEFAULT_COLUMNS


def partial_metadata(obj: Obj) -> dict[str, Any]:
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata", {}),
    }


def table(
    rt: ResourceType,
    objects: Iterable[Obj],
    *,
    include_object: str = "Metadata",
    list_meta: dict[str, Any] | None = None,
    headers: bool = True,
) -> dict[str, Any]:
    cols = columns_for(rt)
    rows = []
    for obj in objects:
        cells = []
        for col in cols:
            try:
                cells.append(col.cell(obj))
            except (KeyError, TypeError, ValueError, IndexError):
                cells.append(None)
        row: dict[str, Any] = {"cells": cells}
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = partial_metadata(obj)
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta or {},
        "columnDefinitions": [c.definition() for c in cols] if headers else None,
        "rows": rows,
    }
