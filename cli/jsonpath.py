"""kubectl's ``-o jsonpath=TEMPLATE`` and ``-o custom-columns=SPEC``, over a command's document
(pure).

The template language is kubectl's (kubernetes.io, "JSONPath Support"): text outside braces is
printed as it is; inside braces an expression of ``.field`` (a dot in a key written ``\\.``:
``.metadata.labels.nvidia\\.com/gpu\\.clique``), ``['field']``, ``[n]`` (negative from the
end), ``[start:end]``, ``[*]``, ``..field`` (at any depth), ``[?(@.field == "x")]``
(``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, or ``@.field`` alone for "has it"), ``@`` for the
current object, ``{range EXPR}...{end}`` to repeat for each result, and quoted text
(``{"\\n"}``). Several results of one expression are printed separated by spaces; maps and
lists print as JSON; a field that does not exist is an error naming it, as in kubectl.

Custom columns are ``HEADER:EXPR`` pairs separated by commas, each expression with or without
its braces, applied to each row of the command (its domains, cliques, findings); a value that
is missing or null prints ``<none>``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

from shared.command_errors import CommandError

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<recursive>\.\.)(?P<rname>(?:[A-Za-z0-9_\-/]|\\\.)+|\*)?
    | \.(?P<name>(?:[A-Za-z0-9_\-/]|\\\.)+|\*)
    | \[\s*(?P<quoted>'[^']*'|"[^"]*")\s*\]
    | \[\s*\?\((?P<filter>.*?)\)\s*\]
    | \[\s*(?P<slice>-?\d*\s*:\s*-?\d*)\s*\]
    | \[\s*(?P<index>-?\d+)\s*\]
    | \[\s*\*\s*\]
    | (?P<at>@)
    | (?P<dollar>\$)
    )""",
    re.VERBOSE,
)
_FILTER = re.compile(
    r"^\s*@(?P<path>[^=!<>]*?)\s*(?:(?P<op>==|!=|<=|>=|<|>)\s*(?P<value>.+?))?\s*$"
)


class JsonPathError(CommandError):
    """A template that does not parse, or asks for a field that is not there."""


class _MissingError(Exception):
    """A field or index the data does not have (the argument names it)."""


def _steps(expression: str) -> list[tuple[str, Any]]:
    """The steps of one expression (``.a[0].b``)."""
    steps: list[tuple[str, Any]] = []
    text = expression.strip()
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise JsonPathError(f"jsonpath: cannot parse {expression!r} at {text[position:]!r}")
        position = match.end()
        if match.group("recursive"):
            steps.append(("recursive", (match.group("rname") or "*").replace("\\.", ".")))
        elif match.group("name") is not None:
            name = match.group("name").replace("\\.", ".")
            steps.append(("all", None) if name == "*" else ("field", name))
        elif match.group("quoted") is not None:
            steps.append(("field", match.group("quoted")[1:-1]))
        elif match.group("filter") is not None:
            steps.append(("filter", match.group("filter")))
        elif match.group("slice") is not None:
            start, _, end = match.group("slice").partition(":")
            steps.append(
                (
                    "slice",
                    (int(start) if start.strip() else None, int(end) if end.strip() else None),
                )
            )
        elif match.group("index") is not None:
            steps.append(("index", int(match.group("index"))))
        elif match.group("at") or match.group("dollar"):
            continue
        else:
            steps.append(("all", None))
    return steps


def _children(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return list(value.values())
    if isinstance(value, list):
        return list(value)
    return []


def _descendants(value: Any) -> Iterator[Any]:
    yield value
    for child in _children(value):
        yield from _descendants(child)


def _literal(text: str) -> Any:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _matches(item: Any, condition: str) -> bool:
    found = _FILTER.match(condition)
    if found is None:
        raise JsonPathError(f"jsonpath: cannot parse the filter {condition!r}")
    try:
        values = _evaluate(item, _steps(found.group("path")), strict=True)
    except _MissingError:
        return False
    if found.group("op") is None:
        return bool(values)
    wanted = _literal(found.group("value"))
    for value in values:
        try:
            if {
                "==": value == wanted,
                "!=": value != wanted,
                "<": value < wanted,
                "<=": value <= wanted,
                ">": value > wanted,
                ">=": value >= wanted,
            }[found.group("op")]:
                return True
        except TypeError:
            continue
    return False


def _evaluate(root: Any, steps: Sequence[tuple[str, Any]], *, strict: bool) -> list[Any]:
    current = [root]
    for kind, argument in steps:
        following: list[Any] = []
        for value in current:
            if kind == "field":
                if isinstance(value, dict) and argument in value:
                    following.append(value[argument])
                elif strict:
                    raise _MissingError(argument)
            elif kind == "all":
                following += _children(value)
            elif kind == "index":
                if isinstance(value, list) and -len(value) <= argument < len(value):
                    following.append(value[argument])
                elif strict:
                    raise _MissingError(f"[{argument}]")
            elif kind == "slice":
                if isinstance(value, list):
                    following += value[argument[0] : argument[1]]
            elif kind == "filter":
                following += [item for item in _children(value) if _matches(item, argument)]
            else:  # recursive
                for node in _descendants(value):
                    if argument == "*":
                        following += _children(node)
                    elif isinstance(node, dict) and argument in node:
                        following.append(node[argument])
        current = following
    return current


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _blocks(template: str) -> list[tuple[str, str]]:
    """``("text", ...)`` and ``("expr", ...)`` parts of a template."""
    parts: list[tuple[str, str]] = []
    position = 0
    while position < len(template):
        start = template.find("{", position)
        if start < 0:
            parts.append(("text", template[position:]))
            break
        if start > position:
            parts.append(("text", template[position:start]))
        end = template.find("}", start)
        if end < 0:
            raise JsonPathError(f"jsonpath: unclosed {{ in {template!r}")
        parts.append(("expr", template[start + 1 : end]))
        position = end + 1
    return parts


def _render(parts: list[tuple[str, str]], data: Any, out: list[str]) -> None:
    index = 0
    while index < len(parts):
        kind, body = parts[index]
        index += 1
        if kind == "text":
            out.append(body)
            continue
        body = body.strip()
        if body.startswith("range "):
            depth, inner = 1, index
            while inner < len(parts):
                k, b = parts[inner]
                if k == "expr" and b.strip().startswith("range "):
                    depth += 1
                elif k == "expr" and b.strip() == "end":
                    depth -= 1
                    if depth == 0:
                        break
                inner += 1
            if inner == len(parts):
                raise JsonPathError("jsonpath: {range} without {end}")
            for item in _values(data, body[len("range ") :]):
                _render(parts[index:inner], item, out)
            index = inner + 1
        elif body == "end":
            raise JsonPathError("jsonpath: {end} without {range}")
        elif len(body) >= 2 and body[0] == body[-1] == '"':
            out.append(json.loads(body))
        else:
            out.append(" ".join(_text(value) for value in _values(data, body)))


def _values(data: Any, expression: str) -> list[Any]:
    try:
        return _evaluate(data, _steps(expression), strict=True)
    except _MissingError as missing:
        raise JsonPathError(
            f"jsonpath: {expression.strip()} is not found ({missing} is missing)"
        ) from None


def jsonpath(template: str, data: Any) -> str:
    """``template`` applied to ``data`` (the module docstring)."""
    out: list[str] = []
    _render(_blocks(template), data, out)
    return "".join(out)


def columns(spec: str) -> list[tuple[str, str]]:
    """``HEADER:EXPR,...`` as pairs; UsageError when a column has no expression."""
    pairs = []
    for column in spec.split(","):
        header, colon, expression = column.partition(":")
        if not colon or not header.strip() or not expression.strip():
            raise JsonPathError(
                f"custom-columns: {column!r} is not HEADER:EXPRESSION (e.g. NAME:.name)"
            )
        expression = expression.strip()
        if expression.startswith("{") and expression.endswith("}"):
            expression = expression[1:-1]
        _steps(expression)  # fails now on a column that cannot parse
        pairs.append((header.strip(), expression))
    return pairs


def column_rows(spec: str, rows: Sequence[Any]) -> tuple[list[str], list[list[str]]]:
    """The headers and one row of cells per item of ``rows``."""
    pairs = columns(spec)
    cells = []
    for row in rows:
        line = []
        for _header, expression in pairs:
            values = [v for v in _evaluate(row, _steps(expression), strict=False) if v is not None]
            line.append(",".join(_text(v) for v in values) if values else "<none>")
        cells.append(line)
    return [header for header, _ in pairs], cells
