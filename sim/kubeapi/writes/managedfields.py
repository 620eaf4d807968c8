"""Field ownership (``metadata.managedFields``): field sets, their FieldsV1 encoding, and
ownership changes on ordinary (non-apply) writes.

A field set is a set of paths; a path is a tuple of FieldsV1 elements: ``f:<name>`` for a
field, ``k:<json>`` for an element of an associative list (identified by its key fields),
``v:<json>`` for an element of a set, and ``.`` for "this list element itself". Leaves are
scalars, atomic lists and atomic maps. How lists are identified comes from the schema:
``x-kubernetes-list-type`` / ``x-kubernetes-list-map-keys`` (and, for built-in kinds, the
patch merge key); lists without a schema are atomic.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sim.kubeapi.machinery import codec
from sim.kubeapi.validation.schema import Node
from sim.kubeapi.validation.shape import Shape

FieldPath = tuple[str, ...]
ITEM = "."
OWNED_METADATA = ("labels", "annotations", "finalizers", "ownerReferences")


def item_key(element: Any, keys: list[str]) -> str:
    ident = {k: element.get(k) for k in keys if isinstance(element, dict) and k in element}
    return "k:" + codec.encode(dict(sorted(ident.items()))).decode()


def set_key(element: Any) -> str:
    return "v:" + codec.encode(element).decode()


def _field(name: str) -> str:
    return "f:" + name


# -- computing field sets -----------------------------------------------------------------------


def leaf_paths(
    obj: dict[str, Any], shape: Shape, *, exclude_status: bool = False
) -> set[FieldPath]:
    out: set[FieldPath] = set()
    root = shape.root()
    for key, value in obj.items():
        if key in ("apiVersion", "kind"):
            continue
        if key == "status" and exclude_status:
            continue
        if key == "metadata":
            meta_node = shape.child(root, "metadata")
            for mkey in OWNED_METADATA:
                if mkey in (value or {}):
                    _collect(
                        value[mkey],
                        shape,
                        shape.raw_child(meta_node, mkey),
                        ("f:metadata", _field(mkey)),
                        out,
                    )
            continue
        _collect(value, shape, shape.raw_child(root, key), (_field(key),), out)
    return out


def _collect(
    value: Any, shape: Shape, raw: Node | None, path: FieldPath, out: set[FieldPath]
) -> None:
    node = shape.schema.resolve(raw) if (raw is not None and shape.schema is not None) else None
    if isinstance(value, dict):
        if not value or shape.atomic_map(raw):
            out.add(path)
            return
        for key, sub in value.items():
            _collect(sub, shape, shape.raw_child(node, key), (*path, _field(key)), out)
    elif isinstance(value, list):
        kind, keys = shape.list_kind(raw)
        if kind == "atomic" or not value:
            out.add(path)
        elif kind == "set":
            for element in value:
                out.add((*path, set_key(element)))
        else:
            item = shape.items(node)
            for element in value:
                ipath = (*path, item_key(element, keys))
                out.add((*ipath, ITEM))
                if isinstance(element, dict):
                    for key, sub in element.items():
                        _collect(sub, shape, shape.raw_child(item, key), (*ipath, _field(key)), out)
    else:
        out.add(path)


def changed_paths(old: Any, new: Any, shape: Shape) -> tuple[set[FieldPath], set[FieldPath]]:
    """(paths set or changed in ``new``, paths present in ``old`` but gone from ``new``)."""
    changed: set[FieldPath] = set()
    removed: set[FieldPath] = set()
    root = shape.root()
    for key in set(old) | set(new):
        if key in ("apiVersion", "kind"):
            continue
        if key == "metadata":
            meta_node = shape.child(root, "metadata")
            om, nm = old.get("metadata") or {}, new.get("metadata") or {}
            for mkey in OWNED_METADATA:
                _diff(
                    om.get(mkey, _ABSENT),
                    nm.get(mkey, _ABSENT),
                    shape,
                    shape.raw_child(meta_node, mkey),
                    ("f:metadata", _field(mkey)),
                    changed,
                    removed,
                )
            continue
        _diff(
            old.get(key, _ABSENT),
            new.get(key, _ABSENT),
            shape,
            shape.raw_child(root, key),
            (_field(key),),
            changed,
            removed,
        )
    return changed, removed


class _Absent:
    pass


_ABSENT: Any = _Absent()


def _diff(
    old: Any,
    new: Any,
    shape: Shape,
    raw: Node | None,
    path: FieldPath,
    changed: set[FieldPath],
    removed: set[FieldPath],
) -> None:
    if old is _ABSENT and new is _ABSENT:
        return
    if new is _ABSENT:
        _collect(old, shape, raw, path, removed)
        return
    if old is _ABSENT:
        _collect(new, shape, raw, path, changed)
        return
    if old == new:
        return
    node = shape.schema.resolve(raw) if (raw is not None and shape.schema is not None) else None
    if (
        isinstance(old, dict)
        and isinstance(new, dict)
        and old
        and new
        and not shape.atomic_map(raw)
    ):
        for key in set(old) | set(new):
            _diff(
                old.get(key, _ABSENT),
                new.get(key, _ABSENT),
                shape,
                shape.raw_child(node, key),
                (*path, _field(key)),
                changed,
                removed,
            )
        return
    if isinstance(old, list) and isinstance(new, list) and old and new:
        kind, keys = shape.list_kind(raw)
        if kind == "set":
            before = {set_key(e) for e in old}
            after = {set_key(e) for e in new}
            changed.update((*path, k) for k in after - before)
            removed.update((*path, k) for k in before - after)
            return
        if kind == "map":
            item = shape.items(node)
            old_items = {item_key(e, keys): e for e in old}
            new_items = {item_key(e, keys): e for e in new}
            for ident in set(old_items) | set(new_items):
                ipath = (*path, ident)
                o, n = old_items.get(ident, _ABSENT), new_items.get(ident, _ABSENT)
                if o is _ABSENT:
                    changed.add((*ipath, ITEM))
                elif n is _ABSENT:
                    removed.add((*ipath, ITEM))
                if isinstance(o, dict) or isinstance(n, dict):
                    od = o if isinstance(o, dict) else {}
                    nd = n if isinstance(n, dict) else {}
                    for key in set(od) | set(nd):
                        _diff(
                            od.get(key, _ABSENT) if o is not _ABSENT else _ABSENT,
                            nd.get(key, _ABSENT) if n is not _ABSENT else _ABSENT,
                            shape,
                            shape.raw_child(item, key),
                            (*ipath, _field(key)),
                            changed,
                            removed,
                        )
            return
    if isinstance(old, dict | list) and (old or not isinstance(new, dict | list)):
        old_leaves: set[FieldPath] = set()
        _collect(old, shape, raw, path, old_leaves)
        new_leaves: set[FieldPath] = set()
        _collect(new, shape, raw, path, new_leaves)
        removed.update(old_leaves - new_leaves)
        changed.update(new_leaves)
        return
    _collect(new, shape, raw, path, changed)


# -- FieldsV1 -----------------------------------------------------------------------------------


def to_fields_v1(paths: Iterable[FieldPath]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for path in paths:
        node = tree
        for element in path:
            node = node.setdefault(element, {})
    return tree


def from_fields_v1(tree: Any) -> set[FieldPath]:
    out: set[FieldPath] = set()

    def walk(node: Any, path: FieldPath) -> None:
        if not isinstance(node, dict) or not node:
            if path:
                out.add(path)
            return
        for key, sub in node.items():
            if key == ITEM:
                out.add((*path, ITEM))
            else:
                walk(sub, (*path, key))

    walk(tree, ())
    return out


def render_path(path: FieldPath) -> str:
    """``.spec.containers[name="c"].image``: how conflicts name a field."""
    out = ""
    for element in path:
        if element.startswith("f:"):
            out += "." + element[2:]
        elif element.startswith("k:"):
            ident = codec.decode(element[2:])
            out += "[" + ",".join(f"{k}={codec.encode(v).decode()}" for k, v in ident.items()) + "]"
        elif element.startswith("v:"):
            out += f"[={element[2:]}]"
    return out


# -- entries ------------------------------------------------------------------------------------


def _tree_add(tree: dict[str, Any], path: FieldPath) -> None:
    node = tree
    for element in path:
        node = node.setdefault(element, {})


def _tree_discard(tree: dict[str, Any], path: FieldPath) -> bool:
    stack: list[tuple[dict[str, Any], str]] = []
    node = tree
    for element in path[:-1]:
        child = node.get(element)
        if not isinstance(child, dict) or not child:
            return False
        stack.append((node, element))
        node = child
    last = path[-1]
    if node.get(last) != {}:
        return False
    del node[last]
    while stack and not node:
        parent, element = stack.pop()
        del parent[element]
        node = parent
    return True


class ManagedEntry:
    """One managedFields entry. Its field set lives as the FieldsV1 tree; the set of paths is
    only materialised when server-side apply needs it, and unchanged entries are written
    back as they came."""

    def __init__(
        self,
        manager: str,
        operation: str,
        api_version: str,
        time: str,
        subresource: str = "",
        *,
        tree: dict[str, Any] | None = None,
        raw: dict[str, Any] | None = None,
    ) -> None:
        self.manager = manager
        self.operation = operation
        self.api_version = api_version
        self.time = time
        self.subresource = subresource
        self.tree: dict[str, Any] = tree if tree is not None else {}
        self._raw = raw
        self._paths: set[FieldPath] | None = None

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> ManagedEntry:
        tree = raw.get("fieldsV1")
        return cls(
            raw.get("manager", ""),
            raw.get("operation", "Update"),
            raw.get("apiVersion", ""),
            raw.get("time", ""),
            raw.get("subresource", ""),
            tree=tree if isinstance(tree, dict) else {},
            raw=raw,
        )

    @property
    def paths(self) -> set[FieldPath]:
        if self._paths is None:
            self._paths = from_fields_v1(self.tree)
        return self._paths

    @paths.setter
    def paths(self, value: set[FieldPath]) -> None:
        self._paths = set(value)
        self.tree = to_fields_v1(self._paths)
        self._raw = None

    def discard(self, path: FieldPath) -> None:
        if _tree_discard(self.tree, path):
            self._raw = None
            if self._paths is not None:
                self._paths.discard(path)

    def add(self, path: FieldPath) -> None:
        _tree_add(self.tree, path)
        self._raw = None
        if self._paths is not None:
            self._paths.add(path)

    def touch(self, api_version: str) -> None:
        self.api_version = api_version
        self.time = codec.format_time(codec.now())
        self._raw = None

    def render(self) -> dict[str, Any]:
        if self._raw is not None:
            return self._raw
        out: dict[str, Any] = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": self.tree,
        }
        if self.subresource:
            out["subresource"] = self.subresource
        return out

    def same_owner(self, manager: str, operation: str, subresource: str) -> bool:
        return (self.manager, self.operation, self.subresource) == (manager, operation, subresource)


def read_entries(obj: dict[str, Any]) -> list[ManagedEntry]:
    raw = (obj.get("metadata") or {}).get("managedFields") or []
    return [ManagedEntry.parse(e) for e in raw if isinstance(e, dict)]


def write_entries(obj: dict[str, Any], entries: list[ManagedEntry]) -> None:
    kept = [e.render() for e in entries if e.tree]
    meta = obj.setdefault("metadata", {})
    if kept:
        meta["managedFields"] = kept
    else:
        meta.pop("managedFields", None)


def record_update(
    *,
    old: dict[str, Any] | None,
    new: dict[str, Any],
    entries: list[ManagedEntry],
    manager: str,
    api_version: str,
    subresource: str,
    shape: Shape,
) -> None:
    """Give ``manager`` the fields this write set or changed; others lose them."""
    if old is None:
        changed = leaf_paths(new, shape)
        removed: set[FieldPath] = set()
    else:
        changed, removed = changed_paths(old, new, shape)
    if not changed and not removed:
        write_entries(new, entries)
        return
    taken = changed | removed
    for entry in entries:
        for path in taken:
            entry.discard(path)
    mine = next((e for e in entries if e.same_owner(manager, "Update", subresource)), None)
    if mine is None:
        mine = ManagedEntry(manager, "Update", api_version, "", subresource)
        entries.append(mine)
    for path in changed:
        mine.add(path)
    mine.touch(api_version)
    write_entries(new, entries)
