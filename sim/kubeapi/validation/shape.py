"""Schema navigation for field ownership: how a schema names the elements of its lists.

A list is a map (elements identified by ``x-kubernetes-list-map-keys``, or for built-in kinds
by the patch merge key), a set, or atomic; a map may be atomic. Field ownership and
server-side apply walk objects with a :class:`Shape` to name each element they own.
"""

from __future__ import annotations

from sim.kubeapi.validation.schema import Node, Schema


class Shape:
    """Schema-aware navigation used to name list elements."""

    def __init__(self, schema: Schema | None) -> None:
        self.schema = schema
        self._raw_children: dict[tuple[int, str], tuple[Node | None, Node | None]] = {}

    def root(self) -> Node | None:
        return self.schema.resolve(self.schema.root) if self.schema is not None else None

    def child(self, node: Node | None, key: str) -> Node | None:
        if node is None or self.schema is None:
            return None
        return self.schema.property(node, key)

    def items(self, node: Node | None) -> Node | None:
        if node is None or self.schema is None:
            return None
        return self.schema.items(node)

    def raw_child(self, node: Node | None, key: str) -> Node | None:
        """The unresolved property node (list markers sit next to ``$ref``)."""
        if node is None or self.schema is None:
            return None
        cache_key = (id(node), key)
        cached = self._raw_children.get(cache_key)
        if cached is None:
            props = self.schema.resolve(node).get("properties") or {}
            raw = props.get(key)
            cached = (node, raw if raw is not None else self.child(node, key))
            self._raw_children[cache_key] = cached
        return cached[1]

    def list_kind(self, raw: Node | None) -> tuple[str, list[str]]:
        if raw is None:
            return ("atomic", [])
        kind = raw.get("x-kubernetes-list-type")
        if kind == "map":
            return ("map", list(raw.get("x-kubernetes-list-map-keys") or []))
        if kind == "set":
            return ("set", [])
        if kind is None and raw.get("x-kubernetes-patch-merge-key"):
            return ("map", [raw["x-kubernetes-patch-merge-key"]])
        if kind is None and "merge" in str(raw.get("x-kubernetes-patch-strategy") or ""):
            return ("set", [])
        return ("atomic", [])

    def atomic_map(self, raw: Node | None) -> bool:
        return raw is not None and raw.get("x-kubernetes-map-type") == "atomic"
