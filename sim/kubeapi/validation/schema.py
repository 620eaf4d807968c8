"""Structural schemas: pruning, defaulting and validation of objects against OpenAPI v3.

One engine serves two sources:
- CRD ``openAPIV3Schema`` (``mode="crd"``): unknown fields are pruned, ``default`` values are
  applied, and every value rule (type, enum, pattern, bounds, list types ...) is checked,
  producing the field errors of the real apiextensions server;
- the built-in kinds' published schemas (``mode="builtin"``, nodes may ``$ref`` shared
  definitions): unknown fields are pruned, as decoding into Go structs drops them, and a
  wrong JSON type is a decoding error; value rules are left to each kind's validation.
"""

from __future__ import annotations

import base64
import datetime as _dt
import math
import re
import uuid
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Literal

from sim.kubeapi.machinery import codec, errors
from sim.kubeapi.machinery.errors import FieldError

Node = Mapping[str, Any]
Mode = Literal["crd", "builtin"]

_EMPTY: Node = {}

# Fields of metav1.ObjectMeta: the root ``metadata`` of every object is pruned to these.
OBJECT_META_FIELDS = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)


class Resolver:
    """Resolves ``$ref`` pointers (``#/$defs/<name>`` or ``#/components/schemas/<name>``)."""

    def __init__(self, definitions: Mapping[str, Node] | None = None) -> None:
        self.definitions = definitions or {}

    def resolve(self, node: Node | None) -> Node:
        if node is None:
            return _EMPTY
        ref = node.get("$ref")
        if ref is None:
            all_of = node.get("allOf")
            if all_of and len(all_of) == 1 and "$ref" in all_of[0] and "type" not in node:
                ref = all_of[0]["$ref"]
            else:
                return node
        name = ref.rsplit("/", 1)[-1]
        target = self.definitions.get(name)
        if target is None:
            return _EMPTY
        return self.resolve(target)


NO_REFS = Resolver()


def node_type(node: Node) -> str | None:
    declared = node.get("type")
    if isinstance(declared, list):
        for t in declared:
            if t != "null":
                return str(t)
        return None
    return declared


def is_int_or_string(node: Node) -> bool:
    if node.get("x-kubernetes-int-or-string"):
        return True
    one_of = node.get("oneOf")
    if one_of and node_type(node) is None:
        kinds = {node_type(alt) for alt in one_of}
        return kinds <= {"string", "integer", "number"}
    return False


def json_type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def type_matches(expected: str, value: Any) -> bool:
    if expected == "object":
        return isinstance(value, dict)
    if expected == "array":
        return isinstance(value, list)
    if expected == "string":
        return isinstance(value, str)
    if expected == "boolean":
        return isinstance(value, bool)
    if expected == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if expected == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return True


def child_path(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class Schema:
    """A structural schema with its ref resolver and the rules of its source."""

    def __init__(self, root: Node, *, resolver: Resolver = NO_REFS, mode: Mode = "crd") -> None:
        self.root = root
        self.resolver = resolver
        self.mode = mode
        # Schema nodes never change, so lookups are memoised by node identity; the cached
        # entries keep their nodes alive, so ids are not reused while cached.
        self._resolved: dict[int, tuple[Node, Node]] = {}
        self._props: dict[tuple[int, str], tuple[Node, Node | None]] = {}
        self._items: dict[int, tuple[Node, Node | None]] = {}
        self._kinds: dict[int, tuple[Node, str]] = {}

    def resolve(self, node: Node | None) -> Node:
        if node is None:
            return _EMPTY
        cached = self._resolved.get(id(node))
        if cached is None:
            cached = (node, self.resolver.resolve(node))
            self._resolved[id(node)] = cached
        return cached[1]

    # -- navigation, shared with patching and field ownership -----------------------------------

    def property(self, node: Node, key: str) -> Node | None:
        cache_key = (id(node), key)
        cached = self._props.get(cache_key)
        if cached is None:
            cached = (node, self._property(node, key))
            self._props[cache_key] = cached
        return cached[1]

    def _property(self, node: Node, key: str) -> Node | None:
        node = self.resolve(node)
        props = node.get("properties")
        if props and key in props:
            return self.resolve(props[key])
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            return self.resolve(extra)
        return None

    def items(self, node: Node) -> Node | None:
        cached = self._items.get(id(node))
        if cached is None:
            resolved = self.resolve(node)
            items = resolved.get("items")
            cached = (node, self.resolve(items) if isinstance(items, dict) else None)
            self._items[id(node)] = cached
        return cached[1]

    # -- pruning --------------------------------------------------------------------------------

    def prune(self, obj: dict[str, Any], *, patch: bool = False) -> list[str]:
        """Drop unknown fields in place; returns their paths (for field validation warnings).

        ``patch=True`` prunes a merge or strategic-merge patch document instead: ``null``
        values (deletions) and ``$``-directives are kept.
        """
        unknown: list[str] = []
        root = self.resolve(self.root)
        self._prune_object(obj, root, "", unknown, root_level=True, patch=patch)
        return unknown

    def _prune_object(
        self,
        value: dict[str, Any],
        node: Node,
        path: str,
        unknown: list[str],
        *,
        root_level: bool,
        patch: bool = False,
    ) -> None:
        props: Mapping[str, Any] = node.get("properties") or {}
        extra = node.get("additionalProperties")
        preserve = bool(node.get("x-kubernetes-preserve-unknown-fields"))
        embedded = root_level or bool(node.get("x-kubernetes-embedded-resource"))
        for key in list(value):
            sub = value[key]
            if embedded and key in ("apiVersion", "kind"):
                continue
            if patch and (sub is None or key.startswith("$")):
                continue
            if embedded and key == "metadata" and isinstance(sub, dict):
                self._prune_metadata(sub, child_path(path, key), unknown, patch=patch)
                continue
            if sub is None and self.mode == "crd":
                child_node = props.get(key) if key in props else extra
                if not (isinstance(child_node, dict) and self.resolve(child_node).get("nullable")):
                    del value[key]
                    continue
            if sub is None:
                if self.mode == "builtin":
                    del value[key]
                continue
            if key in props:
                self._prune_value(
                    sub, self.resolve(props[key]), child_path(path, key), unknown, patch=patch
                )
            elif isinstance(extra, dict):
                self._prune_value(
                    sub, self.resolve(extra), child_path(path, key), unknown, patch=patch
                )
            elif (
                preserve
                or extra is True
                or (not props and extra is None and self.mode == "builtin")
            ):
                continue
            else:
                unknown.append(child_path(path, key))
                del value[key]

    def _prune_metadata(
        self, meta: dict[str, Any], path: str, unknown: list[str], *, patch: bool
    ) -> None:
        for key in list(meta):
            if patch and key.startswith("$"):
                continue
            if key not in OBJECT_META_FIELDS:
                unknown.append(child_path(path, key))
                del meta[key]
            elif meta[key] is None and not patch:
                del meta[key]

    def _prune_value(
        self, value: Any, node: Node, path: str, unknown: list[str], *, patch: bool = False
    ) -> None:
        if isinstance(value, dict):
            kind = node_type(node)
            if kind in ("object", None) and (
                node.get("properties")
                or isinstance(node.get("additionalProperties"), dict)
                or node.get("x-kubernetes-embedded-resource")
            ):
                self._prune_object(value, node, path, unknown, root_level=False, patch=patch)
            elif (
                kind == "object"
                and self.mode == "crd"
                and not node.get("x-kubernetes-preserve-unknown-fields")
                and node.get("additionalProperties") is not True
            ):
                for key in list(value):
                    unknown.append(child_path(path, key))
                    del value[key]
        elif isinstance(value, list):
            item = self.items(node)
            if item is not None:
                for i, element in enumerate(value):
                    self._prune_value(element, item, f"{path}[{i}]", unknown, patch=patch)

    # -- defaulting -----------------------------------------------------------------------------

    def apply_defaults(self, obj: dict[str, Any]) -> None:
        self._default(obj, self.resolve(self.root))

    def _default(self, value: Any, node: Node) -> None:
        if isinstance(value, dict):
            props: Mapping[str, Any] = node.get("properties") or {}
            for key, raw_child in props.items():
                child = self.resolve(raw_child)
                if key not in value and "default" in child:
                    value[key] = codec.copy(child["default"])
                if key in value:
                    self._default(value[key], child)
            extra = node.get("additionalProperties")
            if isinstance(extra, dict):
                child = self.resolve(extra)
                for key in value:
                    if key not in props:
                        self._default(value[key], child)
        elif isinstance(value, list):
            item = self.items(node)
            if item is not None:
                for element in value:
                    self._default(element, item)

    # -- JSON type checks (decoding) ------------------------------------------------------------

    def type_errors(self, obj: dict[str, Any]) -> list[tuple[str, str, Any]]:
        """(path, expected type, value) for every value of the wrong JSON type."""
        out: list[tuple[str, str, Any]] = []
        self._types(obj, self.resolve(self.root), "", out)
        return out

    def _kind(self, node: Node) -> str | None:
        """The JSON type a node expects, ``int-or-string``, or None (anything)."""
        cached = self._kinds.get(id(node))
        if cached is None:
            kind = "int-or-string" if is_int_or_string(node) else (node_type(node) or "")
            cached = (node, kind)
            self._kinds[id(node)] = cached
        return cached[1] or None

    def _types(self, value: Any, node: Node, path: str, out: list[tuple[str, str, Any]]) -> None:
        if value is None:
            return
        kind = self._kind(node)
        if kind == "int-or-string":
            if not (isinstance(value, str | int | float) and not isinstance(value, bool)):
                out.append((path, "int-or-string", value))
            return
        if kind is not None and not type_matches(kind, value):
            out.append((path, kind, value))
            return
        if isinstance(value, dict):
            for key, sub in value.items():
                if key[:1] == "$":
                    continue  # patch directives
                if isinstance(sub, str | bool | int | float) or sub is None:
                    child = self.property(node, key)
                    if child is not None and sub is not None:
                        expected = self._kind(child)
                        if expected is not None and expected != "int-or-string":
                            if not type_matches(expected, sub):
                                out.append((child_path(path, key), expected, sub))
                        elif expected == "int-or-string" and isinstance(sub, bool):
                            out.append((child_path(path, key), expected, sub))
                    continue
                child = self.property(node, key)
                if child is not None:
                    self._types(sub, child, child_path(path, key), out)
        elif isinstance(value, list):
            item = self.items(node)
            if item is not None:
                for i, element in enumerate(value):
                    self._types(element, item, f"{path}[{i}]", out)

    # -- value validation (CRDs) ----------------------------------------------------------------

    def validate(self, obj: dict[str, Any]) -> list[FieldError]:
        out: list[FieldError] = []
        root = self.resolve(self.root)
        props: Mapping[str, Any] = root.get("properties") or {}
        for key, raw_child in props.items():
            if key in ("metadata", "apiVersion", "kind"):
                continue
            if key in obj:
                self._validate(obj[key], self.resolve(raw_child), key, out)
        for key in root.get("required") or ():
            if key not in obj:
                out.append(errors.required(key))
        return out

    def _validate(self, value: Any, node: Node, path: str, out: list[FieldError]) -> None:
        if value is None:
            if node.get("nullable"):
                return
            if node_type(node) is not None or is_int_or_string(node):
                out.append(
                    errors.type_invalid(
                        path, None, f'{path} in body must be of type {node_type(node)}: "null"'
                    )
                )
            return
        if is_int_or_string(node):
            if not (
                isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
            ):
                out.append(
                    errors.type_invalid(
                        path,
                        value,
                        f'{path} in body must be of type integer,string: "{json_type_name(value)}"',
                    )
                )
                return
        else:
            kind = node_type(node)
            if kind is not None and not type_matches(kind, value):
                out.append(
                    errors.type_invalid(
                        path,
                        value,
                        f'{path} in body must be of type {kind}: "{json_type_name(value)}"',
                    )
                )
                return
        self._value_rules(value, node, path, out)
        if isinstance(value, dict):
            self._validate_object(value, node, path, out)
        elif isinstance(value, list):
            self._validate_array(value, node, path, out)

    def _validate_object(
        self, value: dict[str, Any], node: Node, path: str, out: list[FieldError]
    ) -> None:
        props: Mapping[str, Any] = node.get("properties") or {}
        extra = node.get("additionalProperties")
        for key, sub in value.items():
            sub_path = child_path(path, key)
            if key in props:
                self._validate(sub, self.resolve(props[key]), sub_path, out)
            elif isinstance(extra, dict):
                self._validate(sub, self.resolve(extra), sub_path, out)
        for key in node.get("required") or ():
            if key not in value:
                out.append(errors.required(child_path(path, key)))
        if node.get("x-kubernetes-embedded-resource"):
            for key in ("apiVersion", "kind"):
                if not value.get(key):
                    out.append(errors.required(child_path(path, key)))
        n = len(value)
        if "maxProperties" in node and n > node["maxProperties"]:
            out.append(errors.too_many(path, n, node["maxProperties"]))
        if "minProperties" in node and n < node["minProperties"]:
            out.append(
                errors.invalid(
                    path,
                    n,
                    f"{path} in body should have at least {node['minProperties']} properties",
                )
            )

    def _validate_array(
        self, value: list[Any], node: Node, path: str, out: list[FieldError]
    ) -> None:
        item = self.items(node)
        if item is not None:
            for i, element in enumerate(value):
                self._validate(element, item, f"{path}[{i}]", out)
        n = len(value)
        if "maxItems" in node and n > node["maxItems"]:
            out.append(errors.too_many(path, n, node["maxItems"]))
        if "minItems" in node and n < node["minItems"]:
            out.append(
                errors.invalid(
                    path, n, f"{path} in body should have at least {node['minItems']} items"
                )
            )
        list_type = node.get("x-kubernetes-list-type")
        if node.get("uniqueItems") or list_type == "set":
            seen: list[Any] = []
            for i, element in enumerate(value):
                if element in seen:
                    out.append(errors.duplicate(f"{path}[{i}]", element))
                else:
                    seen.append(element)
        elif list_type == "map":
            keys = node.get("x-kubernetes-list-map-keys") or []
            seen_keys: set[bytes] = set()
            for i, element in enumerate(value):
                if not isinstance(element, dict):
                    continue
                ident = {k: element.get(k) for k in keys}
                marker = codec.encode(ident)
                if marker in seen_keys:
                    out.append(errors.duplicate(f"{path}[{i}]", ident))
                seen_keys.add(marker)

    def _value_rules(self, value: Any, node: Node, path: str, out: list[FieldError]) -> None:
        enum = node.get("enum")
        if enum is not None and value not in enum:
            shown = [e if isinstance(e, str) else codec.encode(e).decode() for e in enum]
            out.append(errors.not_supported(path, value, shown))
        if isinstance(value, str):
            self._string_rules(value, node, path, out)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            self._number_rules(value, node, path, out)
        for rule_error in self._combinators(value, node, path):
            out.append(rule_error)

    def _string_rules(self, value: str, node: Node, path: str, out: list[FieldError]) -> None:
        if "maxLength" in node and len(value) > node["maxLength"]:
            out.append(errors.too_long(path, node["maxLength"]))
        if "minLength" in node and len(value) < node["minLength"]:
            out.append(
                errors.invalid(
                    path, value, f"{path} in body should be at least {node['minLength']} chars long"
                )
            )
        pattern = node.get("pattern")
        if pattern is not None and not _regex(pattern).search(value):
            out.append(errors.invalid(path, value, f"{path} in body should match '{pattern}'"))
        fmt = node.get("format")
        if fmt and not _format_ok(fmt, value):
            out.append(
                errors.invalid(path, value, f'{path} in body must be of type {fmt}: "{value}"')
            )

    def _number_rules(self, value: float, node: Node, path: str, out: list[FieldError]) -> None:
        if "minimum" in node:
            low = node["minimum"]
            if node.get("exclusiveMinimum") and value <= low:
                out.append(
                    errors.invalid(path, value, f"{path} in body should be greater than {low}")
                )
            elif value < low:
                out.append(
                    errors.invalid(
                        path, value, f"{path} in body should be greater than or equal to {low}"
                    )
                )
        if "maximum" in node:
            high = node["maximum"]
            if node.get("exclusiveMaximum") and value >= high:
                out.append(
                    errors.invalid(path, value, f"{path} in body should be less than {high}")
                )
            elif value > high:
                out.append(
                    errors.invalid(
                        path, value, f"{path} in body should be less than or equal to {high}"
                    )
                )
        step = node.get("multipleOf")
        if step and not math.isclose(value / step, round(value / step)):
            out.append(
                errors.invalid(path, value, f"{path} in body should be a multiple of {step}")
            )
        fmt = node.get("format")
        if fmt == "int32" and isinstance(value, int) and not -(2**31) <= value < 2**31:
            out.append(errors.invalid(path, value, f"{path} in body must be of type int32"))

    def _combinators(self, value: Any, node: Node, path: str) -> list[FieldError]:
        out: list[FieldError] = []
        for sub in node.get("allOf") or ():
            self._validate(value, self.resolve(sub), path, out)
        any_of = node.get("anyOf")
        if any_of and not any(self._passes(value, s) for s in any_of):
            out.append(
                errors.invalid(
                    path, value, f"{path} in body must validate at least one schema (anyOf)"
                )
            )
        one_of = node.get("oneOf")
        if one_of and node_type(node) is not None:
            passing = sum(1 for s in one_of if self._passes(value, s))
            if passing != 1:
                out.append(
                    errors.invalid(
                        path, value, f"{path} in body must validate one and only one schema (oneOf)"
                    )
                )
        negated = node.get("not")
        if negated is not None and self._passes(value, negated):
            out.append(
                errors.invalid(path, value, f"{path} in body must not validate the schema (not)")
            )
        return out

    def _passes(self, value: Any, node: Node) -> bool:
        probe: list[FieldError] = []
        self._validate(value, self.resolve(node), "", probe)
        return not probe


@lru_cache(maxsize=512)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _format_ok(fmt: str, value: str) -> bool:
    try:
        if fmt == "date-time":
            _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        elif fmt == "date":
            _dt.date.fromisoformat(value)
        elif fmt == "uuid":
            uuid.UUID(value)
        elif fmt == "byte":
            base64.b64decode(value, validate=True)
        elif fmt == "ipv4":
            parts = value.split(".")
            return len(parts) == 4 and all(p.isdigit() and 0 <= int(p) <= 255 for p in parts)
    except ValueError:
        return False
    return True
