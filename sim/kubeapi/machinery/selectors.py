"""Label selectors (``a=b,c in (x,y),!d``) and field selectors (``spec.nodeName=n1``).

Parsing follows the grammar and operators of the API server; a selector that does not
parse, or a field the kind does not index, raises a 400 BadRequest ApiError.

:func:`~shared.scheduling.labels.requirement_holds` is the one label-matching rule of the tree:
the emulator's selectors, the simulated scheduler's and the clique allocator's label and node
selectors all match through it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from shared.scheduling.labels import LABEL_SELECTOR_OPERATORS, OPERATORS, Op, requirement_holds
from sim.kubeapi.machinery import errors, names


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    op: Op
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return requirement_holds(self.op, self.key, self.values, labels)


@dataclass(frozen=True, slots=True)
class LabelSelector:
    requirements: tuple[Requirement, ...]

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    def text(self) -> str:
        """The selector in the string syntax, requirements ordered by key (as kubectl shows
        a metav1.LabelSelector); empty for a selector without requirements."""
        return ",".join(_requirement_text(r) for r in sorted(self.requirements, key=_by_key))


def _by_key(requirement: Requirement) -> str:
    return requirement.key


def _requirement_text(requirement: Requirement) -> str:
    op, key = requirement.op, requirement.key
    values = sorted(requirement.values)
    if op is Op.EXISTS:
        return key
    if op is Op.DOES_NOT_EXIST:
        return f"!{key}"
    if op in (Op.IN, Op.NOT_IN):
        return f"{key} {op.value} ({','.join(values)})"
    symbol = {Op.GREATER: ">", Op.LESS: "<"}.get(op, op.value)
    return f"{key}{symbol}{','.join(values)}"


EVERYTHING = LabelSelector(())

# -- label selector lexer / parser --------------------------------------------------------------

_SPECIAL = set("!=,()<> \t\n")


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if ch in "!=":
            if i + 1 < len(text) and text[i + 1] == "=":
                out.append(ch + "=")
                i += 2
            else:
                out.append(ch)
                i += 1
            continue
        if ch in ",()<>":
            out.append(ch)
            i += 1
            continue
        start = i
        while i < len(text) and text[i] not in _SPECIAL:
            i += 1
        out.append(text[start:i])
    return out


def _is_ident(token: str | None) -> bool:
    return token is not None and token not in {"!", "=", "==", "!=", ",", "(", ")", "<", ">"}


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.pos = 0

    def peek(self) -> str | None:
        return self.toks[self.pos] if self.pos < len(self.toks) else None

    def take(self) -> str | None:
        tok = self.peek()
        self.pos += 1
        return tok

    def fail(self, found: str | None, expected: str) -> errors.ApiError:
        return errors.bad_request(
            f"unable to parse requirement: found '{found or ''}', expected: {expected}"
        )

    def parse(self) -> LabelSelector:
        reqs: list[Requirement] = []
        while self.peek() is not None:
            reqs.append(self.requirement())
            tok = self.take()
            if tok is None:
                break
            if tok != ",":
                raise self.fail(tok, "',' or 'end of string'")
            if self.peek() is None:
                raise self.fail(None, "identifier after ','")
        return LabelSelector(tuple(reqs))

    def requirement(self) -> Requirement:
        tok = self.take()
        if tok == "!":
            key = self.take()
            if not _is_ident(key) or key in ("in", "notin"):
                raise self.fail(key, "identifier after '!'")
            assert key is not None
            _check_key(key)
            return Requirement(key, Op.DOES_NOT_EXIST)
        if not _is_ident(tok):
            raise self.fail(tok, "identifier")
        assert tok is not None
        key = tok
        _check_key(key)
        nxt = self.peek()
        if nxt is None or nxt == ",":
            return Requirement(key, Op.EXISTS)
        op_tok = self.take()
        if op_tok in ("=", "==", "!="):
            value = self.peek()
            if value is None or value == ",":
                value = ""
            elif _is_ident(value):
                self.take()
            else:
                raise self.fail(value, "identifier")
            _check_value(value)
            op = {"=": Op.EQUALS, "==": Op.DOUBLE_EQUALS, "!=": Op.NOT_EQUALS}[op_tok]
            return Requirement(key, op, frozenset({value}))
        if op_tok in ("<", ">"):
            value = self.take()
            if not _is_ident(value):
                raise self.fail(value, "integer value")
            assert value is not None
            try:
                int(value)
            except ValueError:
                raise errors.bad_request(
                    f"unable to parse requirement: for 'Gt', 'Lt' operators, the value must be "
                    f"an integer: {value}"
                ) from None
            return Requirement(key, Op.GREATER if op_tok == ">" else Op.LESS, frozenset({value}))
        if op_tok in ("in", "notin"):
            if self.take() != "(":
                raise self.fail(
                    self.toks[self.pos - 1] if self.pos <= len(self.toks) else None,
                    "'(' after 'in'/'notin'",
                )
            values: set[str] = set()
            expect_value = True
            while True:
                tok2 = self.take()
                if tok2 is None:
                    raise self.fail(None, "')'")
                if tok2 == ")":
                    if expect_value and values:
                        values.add("")
                    break
                if tok2 == ",":
                    if expect_value:
                        values.add("")
                    expect_value = True
                    continue
                if not _is_ident(tok2):
                    raise self.fail(tok2, "identifier or ')'")
                _check_value(tok2)
                values.add(tok2)
                expect_value = False
            return Requirement(key, Op.IN if op_tok == "in" else Op.NOT_IN, frozenset(values))
        raise self.fail(op_tok, "'=', '!=', '==', 'in', notin'")


def _check_key(key: str) -> None:
    problems = names.qualified_name(key)
    if problems:
        raise errors.bad_request(
            f'unable to parse requirement: key: Invalid value: "{key}": {"; ".join(problems)}'
        )


def _check_value(value: str) -> None:
    problems = names.label_value(value)
    if problems:
        raise errors.bad_request(
            f'unable to parse requirement: values[0][{value}]: Invalid value: "{value}": '
            f"{'; '.join(problems)}"
        )


def parse_label_selector(text: str | None) -> LabelSelector:
    if not text:
        return EVERYTHING
    return _Parser(text).parse()


def from_label_selector_object(obj: Mapping[str, Any] | None) -> LabelSelector:
    """metav1.LabelSelector (matchLabels + matchExpressions); None selects everything."""
    if obj is None:
        return EVERYTHING
    reqs: list[Requirement] = []
    for key, value in sorted((obj.get("matchLabels") or {}).items()):
        reqs.append(Requirement(key, Op.EQUALS, frozenset({value})))
    for expr in obj.get("matchExpressions") or []:
        op = OPERATORS.get(expr.get("operator", ""))
        if op not in LABEL_SELECTOR_OPERATORS:
            raise errors.bad_request(
                f"{expr.get('operator')!r} is not a valid label selector operator"
            )
        reqs.append(Requirement(expr.get("key", ""), op, frozenset(expr.get("values") or [])))
    return LabelSelector(tuple(reqs))


def validate_label_selector_object(obj: Any, path: str) -> list[errors.FieldError]:
    if obj is None:
        return []
    if not isinstance(obj, dict):
        return [errors.type_invalid(path, obj, "must be an object")]
    out = names.validate_labels(obj.get("matchLabels"), f"{path}.matchLabels")
    for i, expr in enumerate(obj.get("matchExpressions") or []):
        p = f"{path}.matchExpressions[{i}]"
        op = expr.get("operator")
        if op in ("In", "NotIn"):
            if not expr.get("values"):
                out.append(
                    errors.required(
                        f"{p}.values", "must be specified when `operator` is 'In' or 'NotIn'"
                    )
                )
        elif op in ("Exists", "DoesNotExist"):
            if expr.get("values"):
                out.append(
                    errors.forbidden(
                        f"{p}.values",
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    )
                )
        else:
            out.append(errors.invalid(f"{p}.operator", op, "not a valid selector operator"))
        for problem in names.qualified_name(str(expr.get("key", ""))):
            out.append(errors.invalid(f"{p}.key", expr.get("key"), problem))
    return out


# -- field selectors ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    field: str
    value: str
    negate: bool

    def matches(self, fields: Mapping[str, str]) -> bool:
        equal = fields.get(self.field, "") == self.value
        return not equal if self.negate else equal


@dataclass(frozen=True, slots=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...]

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, fields: Mapping[str, str]) -> bool:
        return all(r.matches(fields) for r in self.requirements)

    def exact(self, field: str) -> str | None:
        """The value ``field`` must equal, if the selector pins one (used to narrow lists)."""
        for r in self.requirements:
            if r.field == field and not r.negate:
                return r.value
        return None


NO_FIELDS = FieldSelector(())


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts: list[str] = []
    cur: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            cur.append(text[i : i + 2])
            i += 2
            continue
        if ch == sep:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    parts.append("".join(cur))
    return parts


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            if i + 1 >= len(text) or text[i + 1] not in "\\,=!":
                raise errors.bad_request(
                    f"invalid field selector: invalid escape sequence in {text!r}"
                )
            out.append(text[i + 1])
            i += 2
            continue
        if ch in ",=":
            raise errors.bad_request(f"invalid field selector: unescaped {ch!r} in {text!r}")
        out.append(ch)
        i += 1
    return "".join(out)


def _split_term(term: str) -> tuple[str, str, str] | None:
    i = 0
    while i < len(term):
        if term[i] == "\\":
            i += 2
            continue
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
        i += 1
    return None


def parse_field_selector(text: str | None, supported: Collection[str]) -> FieldSelector:
    """Parse a field selector; fields outside ``supported`` are a 400 like the real server."""
    if not text:
        return NO_FIELDS
    reqs: list[FieldRequirement] = []
    for term in _split_unescaped(text, ","):
        if not term:
            continue
        split = _split_term(term)
        if split is None:
            raise errors.bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        field, op, value = split
        field = field.strip()
        if field not in supported:
            raise errors.bad_request(f"field label not supported: {field}")
        reqs.append(FieldRequirement(field, _unescape(value), op == "!="))
    return FieldSelector(tuple(reqs))
