"""The CEL environment of ValidatingAdmissionPolicy: its variables, checks and evaluation.

Expressions are compiled and evaluated with the emulator's one CEL environment
(``sim.kubeapi.validation.cel``: cel-python plus the Kubernetes string and list extensions).
They see ``object`` (null on DELETE), ``oldObject`` (null on CREATE), ``request`` (the
AdmissionRequest: kind, resource, subResource, name, namespace, operation, userInfo,
dryRun, options ...), ``params`` (always null here: parameter resources are not
supported), ``namespaceObject`` (the request's Namespace, null for cluster-scoped
objects) and ``variables`` (the policy's ``spec.variables``, each evaluated once per
request, in order, seeing the ones before it).

``check`` is what the real server's type check does at create time, as far as an untyped
environment can: the expression must parse, every free identifier must be one of those
above, and every ``variables.<name>`` must name a variable declared before it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from celpy import celtypes
from celpy.adapter import json_to_cel
from lark import Token, Tree

from sim.kubeapi.validation import cel

ROOTS = frozenset({"object", "oldObject", "request", "params", "namespaceObject", "variables"})
MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
UNSUPPORTED = {"authorizer": "authorizer checks are not supported by the emulator"}


@dataclass(frozen=True, slots=True)
class References:
    """The free identifiers of an expression and the ``variables.<name>`` it reads."""

    roots: frozenset[str]
    variables: tuple[str, ...]


def _walk(tree: Any, bound: set[str], roots: set[str], variables: list[str]) -> None:
    if not isinstance(tree, Tree):
        return
    if tree.data == "member_dot_arg" and len(tree.children) == 3:
        method = tree.children[1]
        args = tree.children[2]
        if str(method) in MACROS and isinstance(args, Tree) and args.children:
            name = _identifier(args.children[0])
            if name is not None:
                _walk(tree.children[0], bound, roots, variables)
                for arg in args.children[1:]:
                    _walk(arg, bound | {name}, roots, variables)
                return
    if tree.data == "member_dot" and len(tree.children) == 2:
        target = _identifier(tree.children[0])
        if target == "variables" and "variables" not in bound:
            variables.append(str(tree.children[1]))
    if tree.data == "ident":
        name = str(tree.children[0])
        if name not in bound:
            roots.add(name)
        return
    for child in tree.children:
        _walk(child, bound, roots, variables)


def _identifier(tree: Any) -> str | None:
    """The name when ``tree`` is nothing but one identifier."""
    while isinstance(tree, Tree):
        if tree.data == "ident":
            token = tree.children[0]
            return str(token) if isinstance(token, Token) else None
        if len(tree.children) != 1:
            return None
        tree = tree.children[0]
    return None


def references(text: str) -> References:
    """What ``text`` refers to; raises ``cel.CelCompileError`` when it does not parse."""
    cel.compile_rule(text)
    roots: set[str] = set()
    variables: list[str] = []
    _walk(cel.parse(text), set(), roots, variables)
    return References(roots=frozenset(roots), variables=tuple(dict.fromkeys(variables)))


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


@dataclass(frozen=True, slots=True)
class Variable:
    name: str
    expression: str


class Activation:
    """The inputs of one evaluation, converted to CEL once, with the policy's variables.

    Variables are evaluated in declaration order, each seeing those before it; one that
    fails is an error only for the expressions that read it, as on the real server.
    """

    def __init__(self, inputs: Mapping[str, Any], variables: Sequence[Variable]) -> None:
        self._context: dict[str, Any] = {k: json_to_cel(v) for k, v in inputs.items()}
        values: dict[Any, Any] = {}
        self._failed: dict[str, str] = {}
        for variable in variables:
            self._context["variables"] = celtypes.MapType(dict(values))
            try:
                values[celtypes.StringType(variable.name)] = self._evaluate(variable.expression)
            except _Error as exc:
                self._failed[variable.name] = str(exc)
        self._context["variables"] = celtypes.MapType(values)

    def _evaluate(self, text: str) -> Any:
        for name in references(text).variables:
            if name in self._failed:
                raise _Error(
                    f'composited variable "{name}" fails to evaluate: {self._failed[name]}'
                )
        try:
            result = cel.compile_rule(text).evaluate(self._context)
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
