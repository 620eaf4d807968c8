"""Strategic merge patch for built-in kinds, driven by the published schema's
``x-kubernetes-patch-strategy`` / ``x-kubernetes-patch-merge-key`` markers.

Supported: maps merge and ``null`` deletes; lists with strategy ``merge`` and a merge key
merge element-wise by that key (``containers`` by ``name``, ``ports`` by ``containerPort``,
``conditions`` by ``type`` ...); primitive lists with strategy ``merge`` (``finalizers``)
take the union; other lists are replaced. Directives: ``$patch: replace|delete|merge``
(on maps and list elements), ``$retainKeys``, ``$deleteFromPrimitiveList/<field>`` and
``$setElementOrder/<field>``.
"""

from __future__ import annotations

from typing import Any

from sim.kubeapi.machinery import codec
from sim.kubeapi.patches.failures import PatchError
from sim.kubeapi.validation.schema import Node, Schema

_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"
_SET_ORDER = "$setElementOrder/"


class _Field:
    """Patch metadata of one field: its resolved schema and list strategy."""

    __slots__ = ("merge_key", "node", "strategies")

    def __init__(self, node: Node | None, strategies: set[str], merge_key: str | None) -> None:
        self.node = node
        self.strategies = strategies
        self.merge_key = merge_key


def _field(schema: Schema | None, parent: Node | None, key: str) -> _Field:
    if schema is None or parent is None:
        return _Field(None, set(), None)
    resolved_parent = schema.resolve(parent)
    props = resolved_parent.get("properties") or {}
    raw = props.get(key)
    if raw is None:
        extra = resolved_parent.get("additionalProperties")
        if isinstance(extra, dict):
            return _Field(schema.resolve(extra), set(), None)
        return _Field(None, set(), None)
    strategy = str(raw.get("x-kubernetes-patch-strategy") or "")
    return _Field(
        schema.resolve(raw),
        {s for s in strategy.split(",") if s},
        raw.get("x-kubernetes-patch-merge-key"),
    )


def strategic_merge_patch(
    original: dict[str, Any], patch: Any, schema: Schema | None
) -> dict[str, Any]:
    """Apply ``patch`` to ``original`` (neither is modified)."""
    if not isinstance(patch, dict):
        raise PatchError("strategic merge patch must be a JSON object")
    root = schema.resolve(schema.root) if schema is not None else None
    result = _merge_map(codec.copy(original), codec.copy(patch), schema, root)
    if result is None:
        raise PatchError("a strategic merge patch may not delete the whole object")
    return result


def _merge_map(
    original: dict[str, Any] | None, patch: dict[str, Any], schema: Schema | None, node: Node | None
) -> dict[str, Any] | None:
    directive = patch.pop("$patch", None)
    if directive == "delete":
        return None
    if directive == "replace":
        replaced: dict[str, Any] = _strip_directives(patch)
        return replaced
    if directive not in (None, "merge"):
        raise PatchError(f"Unknown patch type: {directive}")
    result = dict(original) if isinstance(original, dict) else {}
    retain = patch.pop("$retainKeys", None)
    orders: dict[str, list[Any]] = {}
    deletions: dict[str, list[Any]] = {}
    for key in list(patch):
        if key.startswith(_SET_ORDER):
            orders[key[len(_SET_ORDER) :]] = patch.pop(key) or []
        elif key.startswith(_DELETE_PRIMITIVE):
            deletions[key[len(_DELETE_PRIMITIVE) :]] = patch.pop(key) or []
    for key, value in patch.items():
        info = _field(schema, node, key)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict) and not _is_replace_only(info):
            merged = _merge_map(
                result.get(key) if isinstance(result.get(key), dict) else None,
                value,
                schema,
                info.node,
            )
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _merge_list(result.get(key), value, info, schema)
        else:
            result[key] = value
    for key, values in deletions.items():
        current = result.get(key)
        if isinstance(current, list):
            result[key] = [v for v in current if v not in values]
    for key, order in orders.items():
        current = result.get(key)
        if isinstance(current, list):
            result[key] = _reorder(current, order, _field(schema, node, key).merge_key)
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _is_replace_only(info: _Field) -> bool:
    return "replace" in info.strategies


def _merge_list(original: Any, patch: list[Any], info: _Field, schema: Schema | None) -> list[Any]:
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [_strip_directives(p) for p in patch if not (isinstance(p, dict) and "$patch" in p)]
    current = list(original) if isinstance(original, list) else []
    if "merge" not in info.strategies:
        return [_strip_directives(p) if isinstance(p, dict) else p for p in patch]
    key = info.merge_key
    item_node = schema.items(info.node) if (schema is not None and info.node is not None) else None
    if key is None:
        # Primitive list with strategy merge: set union, keeping the original order.
        out = list(current)
        for value in patch:
            if value not in out:
                out.append(value)
        return out
    out = list(current)
    for element in patch:
        if not isinstance(element, dict):
            raise PatchError(f"merging list elements requires objects with merge key {key!r}")
        ident = element.get(key)
        index = next(
            (i for i, e in enumerate(out) if isinstance(e, dict) and e.get(key) == ident), None
        )
        directive = element.get("$patch")
        if directive == "delete":
            if index is not None:
                out.pop(index)
            continue
        if index is None:
            merged = _merge_map(None, dict(element), schema, item_node)
            if merged is not None:
                out.append(merged)
        else:
            merged = _merge_map(out[index], dict(element), schema, item_node)
            if merged is None:
                out.pop(index)
            else:
                out[index] = merged
    return out


def _reorder(values: list[Any], order: list[Any], merge_key: str | None) -> list[Any]:
    def ident(v: Any) -> Any:
        if merge_key is not None and isinstance(v, dict):
            return codec.encode(v.get(merge_key))
        return codec.encode(v)

    rank = {ident(v): i for i, v in enumerate(order)}
    ordered = sorted((v for v in values if ident(v) in rank), key=lambda v: rank[ident(v)])
    return ordered + [v for v in values if ident(v) not in rank]


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _strip_directives(v)
            for k, v in value.items()
            if not (k.startswith(("$patch", "$retainKeys", _SET_ORDER, _DELETE_PRIMITIVE)))
        }
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value
