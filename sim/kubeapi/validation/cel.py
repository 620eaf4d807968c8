"""``x-kubernetes-validations``: CEL rules of CRD schemas, evaluated with cel-python.

Each rule sees ``self`` (the value at its schema node) and, on updates where an old value
can be correlated (same property, same map key, same list-map key), ``oldSelf``. Rules that
mention ``oldSelf`` are transition rules and are skipped when there is no old value, as
on the real server. The standard macros (``has``, ``all``, ``exists``, ``exists_one``,
``map``, ``filter``, ``size``, ``matches`` ...) come with cel-python; a few Kubernetes list
and string extensions are added here, and comparisons with ``null`` of every type.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import celpy
from celpy import celtypes, evaluation
from celpy.adapter import json_to_cel

from sim.kubeapi.machinery import errors
from sim.kubeapi.machinery.errors import FieldError, FieldErrorType
from sim.kubeapi.validation.schema import Node, Schema, child_path, node_type

# cel-python logs every evaluation error at ERROR level; they are reported as field errors.
logging.getLogger("celpy").setLevel(logging.CRITICAL)
logging.getLogger("Evaluator").setLevel(logging.CRITICAL)

_OLD_SELF = re.compile(r"\boldSelf\b")
_REASONS = {
    "FieldValueInvalid": FieldErrorType.INVALID,
    "FieldValueForbidden": FieldErrorType.FORBIDDEN,
    "FieldValueRequired": FieldErrorType.REQUIRED,
    "FieldValueDuplicate": FieldErrorType.DUPLICATE,
}


class CelCompileError(ValueError):
    pass


def _ext_functions() -> dict[str, Callable[..., Any]]:
    def lower_ascii(s: Any) -> Any:
        return celtypes.StringType(str(s).lower())

    def upper_ascii(s: Any) -> Any:
        return celtypes.StringType(str(s).upper())

    def trim(s: Any) -> Any:
        return celtypes.StringType(str(s).strip())

    def split(s: Any, sep: Any) -> Any:
        return celtypes.ListType([celtypes.StringType(p) for p in str(s).split(str(sep))])

    def join(items: Any, sep: Any = "") -> Any:
        return celtypes.StringType(str(sep).join(str(i) for i in items))

    def replace(s: Any, old: Any, new: Any) -> Any:
        return celtypes.StringType(str(s).replace(str(old), str(new)))

    def index_of(s: Any, sub: Any) -> Any:
        if isinstance(s, list):
            return celtypes.IntType(s.index(sub) if sub in s else -1)
        return celtypes.IntType(str(s).find(str(sub)))

    def last_index_of(s: Any, sub: Any) -> Any:
        if isinstance(s, list):
            return celtypes.IntType(len(s) - 1 - s[::-1].index(sub) if sub in s else -1)
        return celtypes.IntType(str(s).rfind(str(sub)))

    def is_sorted(items: Any) -> Any:
        return celtypes.BoolType(all(items[i] <= items[i + 1] for i in range(len(items) - 1)))

    def list_sum(items: Any) -> Any:
        total = celtypes.IntType(0)
        for item in items:
            total = total + item
        return total

    def list_min(items: Any) -> Any:
        return min(items)

    def list_max(items: Any) -> Any:
        return max(items)

    # Comparing any value with null is defined in CEL (heterogeneous equality, what the
    # real server's cel-go does); cel-python has no overload for most types against None.
    def equal(a: Any, b: Any) -> Any:
        if a is None or b is None:
            return celtypes.BoolType(a is b)
        return evaluation.bool_eq(a, b)

    def not_equal(a: Any, b: Any) -> Any:
        if a is None or b is None:
            return celtypes.BoolType(a is not b)
        return evaluation.bool_ne(a, b)

    return {
        "_==_": equal,
        "_!=_": not_equal,
        "lowerAscii": lower_ascii,
        "upperAscii": upper_ascii,
        "trim": trim,
        "split": split,
        "join": join,
        "replace": replace,
        "indexOf": index_of,
        "lastIndexOf": last_index_of,
        "isSorted": is_sorted,
        "sum": list_sum,
        "min": list_min,
        "max": list_max,
    }


_ENV = celpy.Environment()
_FUNCTIONS = _ext_functions()


@lru_cache(maxsize=1024)
def parse(text: str) -> Any:
    """The syntax tree of one CEL expression (cached); raises CelCompileError."""
    try:
        return _ENV.compile(text)
    except Exception as exc:  # cel-python raises parser-specific errors
        line, column = getattr(exc, "line", None), getattr(exc, "column", None)
        if isinstance(line, int) and isinstance(column, int):
            # Where cel-go's message says it; cel-python's own text only repeats the input.
            raise CelCompileError(f"ERROR: <input>:{line}:{column}: Syntax error") from None
        raise CelCompileError(
            str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        ) from None


@lru_cache(maxsize=1024)
def compile_rule(text: str) -> Any:
    """Compile (and cache) one CEL expression; raises CelCompileError."""
    return _ENV.program(parse(text), functions=_FUNCTIONS)


def is_transition_rule(text: str) -> bool:
    return bool(_OLD_SELF.search(text))


def evaluate(program: Any, activation: Mapping[str, Any]) -> Any:
    """Evaluate with JSON inputs converted to CEL values; returns the CEL result or raises."""
    context = {k: json_to_cel(v) for k, v in activation.items()}
    return program.evaluate(context)


@dataclass(frozen=True, slots=True)
class _Missing:
    pass


MISSING = _Missing()


class RuleChecker:
    """Runs every rule of a schema over a new object and its old version."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema

    def check(self, new: Any, old: Any = MISSING) -> list[FieldError]:
        out: list[FieldError] = []
        root = self.schema.resolve(self.schema.root)
        self._walk(new, old, root, "", out, root_level=True)
        return out

    def _walk(
        self,
        value: Any,
        old: Any,
        node: Node,
        path: str,
        out: list[FieldError],
        *,
        root_level: bool = False,
    ) -> None:
        if value is None:
            return
        rules = node.get("x-kubernetes-validations")
        if rules:
            self._run_rules(rules, value, old, node, path, out)
        if isinstance(value, dict):
            props: Mapping[str, Any] = node.get("properties") or {}
            extra = node.get("additionalProperties")
            for key, sub in value.items():
                if root_level and key in ("metadata", "apiVersion", "kind"):
                    continue
                child = (
                    props.get(key) if key in props else (extra if isinstance(extra, dict) else None)
                )
                if child is None:
                    continue
                old_sub = old.get(key, MISSING) if isinstance(old, dict) else MISSING
                self._walk(sub, old_sub, self.schema.resolve(child), child_path(path, key), out)
        elif isinstance(value, list):
            item = self.schema.items(node)
            if item is None:
                return
            keys = (
                node.get("x-kubernetes-list-map-keys")
                if node.get("x-kubernetes-list-type") == "map"
                else None
            )
            old_by_key: dict[tuple[Any, ...], Any] = {}
            if keys and isinstance(old, list):
                for element in old:
                    if isinstance(element, dict):
                        old_by_key[tuple(element.get(k) for k in keys)] = element
            for i, element in enumerate(value):
                old_element: Any = MISSING
                if keys and isinstance(element, dict):
                    old_element = old_by_key.get(tuple(element.get(k) for k in keys), MISSING)
                self._walk(element, old_element, item, f"{path}[{i}]", out)

    def _run_rules(
        self, rules: list[Any], value: Any, old: Any, node: Node, path: str, out: list[FieldError]
    ) -> None:
        for rule in rules:
            text = rule.get("rule", "")
            transition = is_transition_rule(text)
            if transition and old is MISSING and not rule.get("optionalOldSelf"):
                continue
            activation: dict[str, Any] = {"self": value}
            if transition:
                activation["oldSelf"] = None if old is MISSING else old
            target = path
            if rule.get("fieldPath"):
                target = path + (
                    rule["fieldPath"]
                    if rule["fieldPath"].startswith(("[", "."))
                    else "." + rule["fieldPath"]
                )
                target = target.lstrip(".")
            shown_type = node_type(node) or "object"
            try:
                result = evaluate(compile_rule(text), activation)
            except CelCompileError as exc:
                out.append(
                    errors.invalid(target or "<root>", shown_type, f"compilation failed: {exc}")
                )
                continue
            except Exception as exc:  # evaluation errors surface as CELEvalError
                detail = exc.args[0] if exc.args else str(exc)
                out.append(
                    errors.invalid(
                        target or "<root>", shown_type, f"{detail} evaluating rule: {text}"
                    )
                )
                continue
            if isinstance(result, Exception):
                detail = result.args[0] if result.args else str(result)
                out.append(
                    errors.invalid(
                        target or "<root>", shown_type, f"{detail} evaluating rule: {text}"
                    )
                )
                continue
            if bool(result):
                continue
            message = rule.get("message") or ""
            expr = rule.get("messageExpression")
            if expr:
                try:
                    produced = evaluate(compile_rule(expr), activation)
                    if isinstance(produced, str) and produced.strip():
                        message = str(produced)
                except Exception:  # a failing messageExpression falls back to message
                    pass
            if not message:
                message = f"failed rule: {text}"
            kind = _REASONS.get(rule.get("reason") or "FieldValueInvalid", FieldErrorType.INVALID)
            field = target or "<root>"
            if kind is FieldErrorType.INVALID:
                out.append(errors.invalid(field, shown_type, message))
            elif kind is FieldErrorType.DUPLICATE:
                out.append(errors.FieldError(kind, field, shown_type, message))
            else:
                out.append(errors.FieldError(kind, field, detail=message))


def compile_errors(schema_node: Any, path: str) -> list[FieldError]:
    """Compile every rule of a CRD schema (at CRD create/update time)."""
    out: list[FieldError] = []

    def walk(node: Any, where: str) -> None:
        if not isinstance(node, dict):
            return
        for i, rule in enumerate(node.get("x-kubernetes-validations") or ()):
            text = rule.get("rule") if isinstance(rule, dict) else None
            rpath = f"{where}.x-kubernetes-validations[{i}].rule"
            if not text:
                out.append(errors.required(rpath))
                continue
            try:
                compile_rule(text)
            except CelCompileError as exc:
                out.append(errors.invalid(rpath, text, f"compilation failed: {exc}"))
        for key, sub in (node.get("properties") or {}).items():
            walk(sub, f"{where}.properties[{key}]")
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], f"{where}.additionalProperties")
        if isinstance(node.get("items"), dict):
            walk(node["items"], f"{where}.items")

    walk(schema_node, path)
    return out
