"""The CEL environment of ValidatingAdmissionPolicy: its variables, checks and evaluation.

Expressions are compiled and evaluated with the emulator's one CEL environment
(``sim.kubeapi.validation.cel``: cel-python plus the Kubernetes string and list extensions).
They see ``object`` (null on DELETE), ``oldObject`` (null on CREATE), ``request`` (the
AdmissionRequest: kind, resource, subResource, name, namespace, operation, userInfo,
dryRun, options ...), ``params`` (the binding's parameter resource, null for a policy
without ``paramKind``), ``namespaceObject`` (the request's Namespace, null for cluster-scoped
objects) and ``variables`` (the policy's ``spec.variables``, each seeing the ones declared
before it, evaluated at most once per request when first read; read them as
``variables.<name>``).

``check`` is what the real server's type check does at create time, as far as an untyped
environment can: the expression must parse, every free identifier must be one of those
above, and every ``variables.<name>`` must name a variable declared before it.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from celpy import celtypes
from celpy.adapter import json_to_cel
from lark import Tree

from sim.kubeapi.validation import cel

ROOTS = frozenset({"object", "oldObject", "request", "params", "namespaceObject", "variables"})
MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
UNSUPPORTED = {"authorizer": "authorizer checks are not supported by the emulator"}


@dataclass(frozen=True, slots=True)
class References:
    """What an expression reads: its free identifiers, the ``variables.<name>`` it reads, and
    every path it reads from a free identifier (``("object", "metadata", "labels")``), the
    longest run of field selections; the expression sees nothing of its inputs but the
    values at those paths."""

    roots: frozenset[str]
    variables: tuple[str, ...]
    paths: tuple[tuple[str, ...], ...]


def _chain(tree: Any) -> tuple[str, ...] | None:
    """``root.field.field`` as a tuple, when ``tree`` is nothing but field selections."""
    fields: list[str] = []
    while isinstance(tree, Tree):
        if tree.data == "member_dot" and len(tree.children) == 2:
            fields.append(str(tree.children[1]))
            tree = tree.children[0]
            continue
        if tree.data == "ident":
            return (str(tree.children[0]), *reversed(fields))
        if len(tree.children) != 1:
            return None
        tree = tree.children[0]
    return None


def _walk(tree: Any, bound: frozenset[str], paths: list[tuple[str, ...]]) -> None:
    if not isinstance(tree, Tree):
        return
    if tree.data == "member_dot_arg" and len(tree.children) == 3:
        method = tree.children[1]
        args = tree.children[2]
        if str(method) in MACROS and isinstance(args, Tree) and args.children:
            name = _identifier(args.children[0])
            if name is not None:
                _walk(tree.children[0], bound, paths)
                for arg in args.children[1:]:
                    _walk(arg, bound | {name}, paths)
                return
    if tree.data in ("member_dot", "ident"):
        chain = _chain(tree)
        if chain is not None:
            if chain[0] not in bound:
                paths.append(chain)
            return
    for child in tree.children:
        _walk(child, bound, paths)


def _identifier(tree: Any) -> str | None:
    """The name when ``tree`` is nothing but one identifier."""
    chain = _chain(tree)
    return chain[0] if chain is not None and len(chain) == 1 else None


@lru_cache(maxsize=1024)
def references(text: str) -> References:
    """What ``text`` refers to; raises ``cel.CelCompileError`` when it does not parse."""
    cel.compile_rule(text)
    paths: list[tuple[str, ...]] = []
    _walk(cel.parse(text), frozenset(), paths)
    variables = [p[1] for p in paths if p[0] == "variables" and len(p) > 1]
    return References(
        roots=frozenset(p[0] for p in paths),
        variables=tuple(dict.fromkeys(variables)),
        paths=tuple(sorted(set(paths))),
    )


def check(text: str, declared: Iterable[str]) -> str:
    """Why ``text`` does not compile beside the ``declared`` variables ("" if it does)."""
    try:
        refs = references(text)
    except cel.CelCompileError as exc:
        return str(exc)
    for name in sorted(refs.roots - ROOTS):
        if name in UNSUPPORTED:
            return f"undeclared reference to '{name}' ({UNSUPPORTED[name]})"
        return f"undeclared reference to '{name}'"
    known = set(declared)
    for name in refs.variables:
        if name not in known:
            return f"undefined field '{name}'"
    return ""


def error_text(exc: BaseException) -> str:
    """An evaluation error in one line, without cel-python's dump of the activation."""
    detail = exc.args[0] if exc.args else exc
    text = str(detail).splitlines()[0] if str(detail) else repr(exc)
    return text.split(" (in activation ", 1)[0]


class EvaluationError(Exception):
    """An expression that could not be evaluated; the message is the real server's."""


class _Error(Exception):
    pass


_ABSENT: Any = object()
RESULTS_KEPT = 4096
_RESULTS: collections.OrderedDict[tuple[str, ...], Any] = collections.OrderedDict()
"""Results (and errors) by expression and the values it read. An expression is a pure
function of those values, and evaluating one with cel-python costs hundreds of microseconds:
the node-restriction policy's match condition, read for every Node write, is one lookup."""


@dataclass(frozen=True, slots=True)
class Variable:
    name: str
    expression: str


class Activation:
    """The inputs of one request's evaluations, with the policy's variables.

    Inputs are converted to CEL the first time an expression reads them, and a variable is
    evaluated the first time one reads it, then kept (so a match condition that reads only
    ``request`` costs no conversion of the objects). A variable that fails is an error
    only for the expressions that read it, as on the real server.
    """

    def __init__(self, inputs: Mapping[str, Any], variables: Sequence[Variable]) -> None:
        self._inputs = dict(inputs)
        self._converted: dict[str, Any] = {}
        self._expressions = {v.name: v.expression for v in variables}
        self._values: dict[str, Any] = {}
        self._failed: dict[str, str] = {}

    def _root(self, name: str) -> Any:
        if name not in self._converted:
            self._converted[name] = json_to_cel(self._inputs.get(name))
        return self._converted[name]

    def _variable(self, name: str) -> Any:
        if name not in self._values and name not in self._failed:
            self._failed[name] = "a variable may not read itself"  # until it has a value
            try:
                self._values[name] = self._evaluate(self._expressions[name])
                del self._failed[name]
            except _Error as exc:
                self._failed[name] = str(exc)
        if name in self._failed:
            raise _Error(f'composited variable "{name}" fails to evaluate: {self._failed[name]}')
        return self._values[name]

    def _read(self, path: tuple[str, ...]) -> Any:
        """The value at ``path`` (a variable's value for ``variables.<name>``)."""
        if path[0] == "variables":
            value: Any = self._variable(path[1]) if path[1] in self._expressions else _ABSENT
            fields = path[2:]
        else:
            value, fields = self._inputs.get(path[0]), path[1:]
        for field in fields:
            if not isinstance(value, dict) or field not in value:
                return _ABSENT
            value = value[field]
        return value

    def _key(self, text: str, refs: References) -> tuple[str, ...] | None:
        """What the result of ``text`` depends on: the expression and the values it reads."""
        parts = [text]
        for path in refs.paths:
            value = self._read(path)
            if value is _ABSENT:
                parts.append("")
                continue
            if path[0] == "variables":
                # A CEL value: its repr names the types (BoolType(True) is not IntType(1)).
                parts.append("=" + repr(value))
                continue
            try:
                parts.append("=" + json.dumps(value, sort_keys=True, separators=(",", ":")))
            except (TypeError, ValueError):
                return None  # not JSON (an input given as something else): not kept
        return tuple(parts)

    def _evaluate(self, text: str) -> Any:
        refs = references(text)
        key = self._key(text, refs)
        if key is not None and key in _RESULTS:
            _RESULTS.move_to_end(key)
            known = _RESULTS[key]
            if isinstance(known, _Error):
                raise known
            return known
        try:
            result = self._compute(text, refs)
        except _Error as exc:
            result = exc
        if key is not None:
            _RESULTS[key] = result
            if len(_RESULTS) > RESULTS_KEPT:
                _RESULTS.popitem(last=False)
        if isinstance(result, _Error):
            raise result
        return result

    def _compute(self, text: str, refs: References) -> Any:
        context = {name: self._root(name) for name in refs.roots if name in self._inputs}
        if "variables" in refs.roots:
            context["variables"] = celtypes.MapType(
                {
                    celtypes.StringType(name): self._variable(name)
                    for name in refs.variables
                    if name in self._expressions
                }
            )
        try:
            result = cel.compile_rule(text).evaluate(context)
        except Exception as exc:  # cel-python raises its own evaluation error types
            raise _Error(error_text(exc)) from None
        if isinstance(result, Exception):
            raise _Error(error_text(result))
        return result

    def _run(self, text: str) -> Any:
        try:
            return self._evaluate(text)
        except _Error as exc:
            raise EvaluationError(f"expression '{text}' resulted in error: {exc}") from None

    def admits(self, text: str) -> bool:
        """A validation: anything but ``true`` denies (raises EvaluationError on an error)."""
        result = self._run(text)
        return isinstance(result, celtypes.BoolType | bool) and bool(result)

    def condition(self, text: str) -> bool:
        """A match condition: must be a bool (raises EvaluationError otherwise)."""
        result = self._run(text)
        if not isinstance(result, celtypes.BoolType | bool):
            raise EvaluationError(
                f"expression '{text}' resulted in error: the result type should be bool but "
                f"got {type(result).__name__}"
            )
        return bool(result)

    def message(self, text: str) -> str:
        """A messageExpression: a one-line string, or "" (then the fallback is used)."""
        try:
            result = self._run(text)
        except EvaluationError:
            return ""
        if not isinstance(result, celtypes.StringType | str):
            return ""
        out = str(result).strip()
        return "" if "\n" in out or len(out) > MAX_MESSAGE_BYTES else out


MAX_MESSAGE_BYTES = 5 * 1024
"""The real server drops an evaluated message longer than this (and one with line breaks)."""
