"""Server-side apply (``application/apply-patch+yaml``), simplified but with the real
contract: the applier owns exactly the fields of its configuration, conflicts with other
owners are a 409 listing each field unless ``force=true``, and fields the applier stops
applying are removed unless someone else also owns them.

Simplifications (see docs/kubeapi.md): a field counts as conflicting when another manager
owns it and the applied value differs from the live value; field sets are not converted
between API versions; removed list elements and map keys are dropped, but empty parent
maps are kept.
"""

from __future__ import annotations

from typing import Any

from sim.kubeapi.machinery import codec, errors
from sim.kubeapi.validation.schema import Node
from sim.kubeapi.validation.shape import Shape
from sim.kubeapi.writes.managedfields import (
    ITEM,
    FieldPath,
    ManagedEntry,
    item_key,
    leaf_paths,
    read_entries,
    render_path,
    set_key,
    write_entries,
)

Obj = dict[str, Any]


CLIENT_SIDE_APPLY = "kubectl-client-side-apply"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


class _Missing:
    pass


def _client_side_applied(live: Obj, shape: Shape) -> set[FieldPath]:
    """Fields of the last client-side applied configuration (kept in an annotation)."""
    raw = ((live.get("metadata") or {}).get("annotations") or {}).get(LAST_APPLIED)
    if not raw:
        return set()
    try:
        last = codec.decode(raw)
    except codec.DecodeError:
        return set()
    return leaf_paths(last, shape) if isinstance(last, dict) else set()


def _last_applied(applied: Obj) -> str:
    config = codec.copy(applied)
    annotations = (config.get("metadata") or {}).get("annotations")
    if isinstance(annotations, dict):
        annotations.pop(LAST_APPLIED, None)
    return codec.encode(config).decode() + "\n"


_MISSING: Any = _Missing()


def value_at(obj: Any, path: FieldPath, shape: Shape) -> Any:
    """The value a field path names (``_MISSING`` when absent)."""
    node: Node | None = shape.root()
    raw: Node | None = None
    value = obj
    for element in path:
        if element == ITEM:
            return value
        if element.startswith("f:"):
            key = element[2:]
            if not isinstance(value, dict) or key not in value:
                return _MISSING
            raw = shape.raw_child(node, key)
            node = (
                shape.schema.resolve(raw)
                if (raw is not None and shape.schema is not None)
                else None
            )
            value = value[key]
        elif element.startswith("k:"):
            _kind, keys = shape.list_kind(raw)
            if not isinstance(value, list):
                return _MISSING
            found = next((e for e in value if item_key(e, keys) == element), _MISSING)
            if found is _MISSING:
                return _MISSING
            node = shape.items(node)
            raw = None
            value = found
        elif element.startswith("v:"):
            if not isinstance(value, list):
                return _MISSING
            return next((e for e in value if set_key(e) == element), _MISSING)
    return value


def _remove(obj: Any, path: FieldPath, shape: Shape) -> None:
    """Delete the field (or list element) a path names, if present."""
    if not path:
        return
    parent_path, last = path[:-1], path[-1]
    if last == ITEM:
        if len(parent_path) < 2:
            return
        list_value = value_at(obj, parent_path[:-1], shape)
        if isinstance(list_value, list):
            target = value_at(obj, parent_path, shape)
            if target is not _MISSING:
                list_value.remove(target)
        return
    parent = value_at(obj, parent_path, shape) if parent_path else obj
    if last.startswith("f:") and isinstance(parent, dict):
        parent.pop(last[2:], None)
    elif last.startswith("v:") and isinstance(parent, list):
        for element in list(parent):
            if set_key(element) == last:
                parent.remove(element)


def merge(
    live: Any, applied: Any, shape: Shape, raw: Node | None = None, *, root: bool = True
) -> Any:
    """The applied configuration merged over the live object."""
    node = (
        shape.root()
        if root
        else (shape.schema.resolve(raw) if (raw is not None and shape.schema is not None) else None)
    )
    if (
        isinstance(applied, dict)
        and isinstance(live, dict)
        and not (raw is not None and shape.atomic_map(raw))
    ):
        out = dict(live)
        for key, value in applied.items():
            child_raw = shape.raw_child(node, key)
            out[key] = (
                merge(live.get(key, _MISSING), value, shape, child_raw, root=False)
                if key in live
                else codec.copy(value)
            )
        return out
    if isinstance(applied, list) and isinstance(live, list):
        kind, keys = shape.list_kind(raw)
        if kind == "set":
            merged = list(live)
            for element in applied:
                if element not in merged:
                    merged.append(element)
            return merged
        if kind == "map":
            item_raw = shape.items(node)
            merged = list(live)
            index = {item_key(e, keys): i for i, e in enumerate(merged)}
            for element in applied:
                ident = item_key(element, keys)
                if ident in index:
                    merged[index[ident]] = merge(
                        merged[index[ident]], element, shape, item_raw, root=False
                    )
                else:
                    merged.append(codec.copy(element))
            return merged
    return codec.copy(applied)


def server_side_apply(
    *,
    live: Obj | None,
    applied: Obj,
    manager: str,
    api_version: str,
    force: bool,
    subresource: str,
    shape: Shape,
) -> Obj:
    """The object after applying ``applied`` as ``manager``; raises a 409 on conflicts."""
    base: Obj = codec.copy(live) if live is not None else {}
    entries = read_entries(base) if live is not None else []
    config = codec.copy(applied)
    config_meta = config.get("metadata") or {}
    wanted = leaf_paths(config, shape)
    upgraded = _client_side_applied(base, shape)
    conflicts: dict[tuple[str, str], list[FieldPath]] = {}
    for entry in entries:
        if entry.same_owner(manager, "Apply", subresource):
            continue
        for path in sorted(entry.paths & wanted):
            if entry.manager == CLIENT_SIDE_APPLY and path in upgraded:
                # Moving from client-side to server-side apply takes these fields over.
                entry.discard(path)
                continue
            if value_at(config, path, shape) != value_at(base, path, shape):
                conflicts.setdefault((entry.manager, entry.api_version), []).append(path)
    if conflicts and not force:
        raise _conflict_error(conflicts)
    for entry in entries:
        if not entry.same_owner(manager, "Apply", subresource) and force:
            entry.paths = entry.paths - wanted
    mine = next((e for e in entries if e.same_owner(manager, "Apply", subresource)), None)
    previous = mine.paths if mine is not None else set()
    others: set[FieldPath] = set()
    for entry in entries:
        if entry is not mine:
            others |= entry.paths
    for path in sorted(previous - wanted, key=len, reverse=True):
        if path not in others:
            _remove(base, path, shape)
    result: Obj = merge(base, config, shape)
    meta = result.setdefault("metadata", {})
    annotations = meta.get("annotations") or {}
    if LAST_APPLIED in annotations:
        annotations[LAST_APPLIED] = _last_applied(applied)
    for key in ("name", "namespace", "generateName"):
        if key in config_meta:
            meta[key] = config_meta[key]
    if mine is None:
        mine = ManagedEntry(manager, "Apply", api_version, "", subresource)
        entries.append(mine)
    mine.paths = set(wanted)
    mine.touch(api_version)
    write_entries(result, entries)
    return result


def _conflict_error(conflicts: dict[tuple[str, str], list[FieldPath]]) -> errors.ApiError:
    total = sum(len(p) for p in conflicts.values())
    causes = []
    parts = []
    for (manager, version), paths in conflicts.items():
        for path in paths:
            causes.append(
                {
                    "reason": "FieldManagerConflict",
                    "message": f'conflict with "{manager}" using {version}',
                    "field": render_path(path),
                }
            )
        if len(paths) == 1:
            parts.append(f'conflict with "{manager}" using {version}: {render_path(paths[0])}')
        else:
            listed = "\n".join(f"- {render_path(p)}" for p in paths)
            parts.append(f'conflicts with "{manager}" using {version}:\n{listed}')
    noun = "conflict" if total == 1 else "conflicts"
    message = f"Apply failed with {total} {noun}: " + "\n".join(parts)
    return errors.apply_conflict(causes, message)
