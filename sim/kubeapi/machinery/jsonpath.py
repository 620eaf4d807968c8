"""The JSONPath subset used by CRD ``additionalPrinterColumns`` and selectable fields.

Supported steps: ``.field``, ``['field']``, ``[n]``, ``[*]`` and filters
``[?(@.key=="value")]`` (also ``!=``); an optional surrounding ``{...}`` is accepted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_STEP = re.compile(
    r"""\.(?P<field>[A-Za-z0-9_\-$]+)
    | \[(?P<index>-?\d+)\]
    | \[\*\]
    | \[['"](?P<quoted>[^'"]+)['"]\]
    | \[\?\(@\.(?P<fkey>[A-Za-z0-9_.\-]+)\s*(?P<fop>==|!=)\s*(?P<fval>"[^"]*"|'[^']*'|[^)]+)\)\]
    """,
    re.VERBOSE,
)


class JSONPathError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class _Step:
    kind: str
    arg: Any = None
    op: str = ""
    value: str = ""


def compile_path(text: str) -> list[_Step]:
    expr = text.strip()
    if expr.startswith("{") and expr.endswith("}"):
        expr = expr[1:-1].strip()
    if expr.startswith("$"):
        expr = expr[1:]
    steps: list[_Step] = []
    pos = 0
    while pos < len(expr):
        match = _STEP.match(expr, pos)
        if match is None:
            raise JSONPathError(f"unsupported JSONPath {text!r} at {expr[pos:]!r}")
        if match.group("field") is not None:
            steps.append(_Step("field", match.group("field")))
        elif match.group("quoted") is not None:
            steps.append(_Step("field", match.group("quoted")))
        elif match.group("index") is not None:
            steps.append(_Step("index", int(match.group("index"))))
        elif match.group("fkey") is not None:
            raw = match.group("fval").strip()
            if raw[:1] in "'\"":
                raw = raw[1:-1]
            steps.append(_Step("filter", match.group("fkey").split("."), match.group("fop"), raw))
        else:
            steps.append(_Step("all"))
        pos = match.end()
    return steps


def _get_path(value: Any, keys: list[str]) -> Any:
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def evaluate(steps: list[_Step], data: Any) -> list[Any]:
    """All values the path selects (empty when nothing matches)."""
    current = [data]
    for step in steps:
        nxt: list[Any] = []
        for value in current:
            if step.kind == "field":
                if isinstance(value, dict) and step.arg in value:
                    nxt.append(value[step.arg])
            elif step.kind == "index":
                if isinstance(value, list) and -len(value) <= step.arg < len(value):
                    nxt.append(value[step.arg])
            elif step.kind == "all":
                if isinstance(value, list):
                    nxt.extend(value)
                elif isinstance(value, dict):
                    nxt.extend(value.values())
            elif isinstance(value, list):
                for element in value:
                    found = _get_path(element, step.arg)
                    text = (
                        found if isinstance(found, str) else ("" if found is None else str(found))
                    )
                    if (text == step.value) == (step.op == "=="):
                        nxt.append(element)
        current = nxt
    return current


def first(text: str, data: Any) -> Any:
    found = evaluate(compile_path(text), data)
    return found[0] if found else None
