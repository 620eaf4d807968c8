"""Structural schema pruning, defaulting and validation; CEL rules."""

from __future__ import annotations

from typing import Any

from sim.kubeapi.validation.cel import RuleChecker, compile_errors
from sim.kubeapi.validation.schema import Schema

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.low <= self.high", "message": "low must not exceed high"},
                {"rule": "self.high >= oldSelf.high", "message": "high may only grow"},
                {
                    "rule": "self.items.all(i, i.name.startsWith('x'))",
                    "fieldPath": ".items",
                    "reason": "FieldValueForbidden",
                },
            ],
            "properties": {
                "low": {"type": "integer", "default": 0},
                "high": {"type": "integer", "default": 10, "maximum": 100},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "ratio": {"type": "number", "exclusiveMinimum": True, "minimum": 0},
                "count": {"x-kubernetes-int-or-string": True},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "closed": {"type": "object"},
                "nullable": {"type": "string", "nullable": True},
                "items": {
                    "type": "array",
                    "maxItems": 3,
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {
                            "name": {"type": "string", "pattern": "^[a-z]+$"},
                            "size": {"type": "integer", "default": 1},
                        },
                    },
                },
            },
        }
    },
}


def _schema() -> Schema:
    return Schema(SCHEMA, mode="crd")


def test_prune_keeps_known_and_preserved_fields() -> None:
    obj = {
        "apiVersion": "x/v1",
        "kind": "X",
        "metadata": {"name": "a", "junk": 1},
        "spec": {
            "low": 1,
            "unknown": 2,
            "free": {"any": {"thing": 1}},
            "closed": {"gone": 1},
            "labels": {"k": "v"},
            "nullable": None,
            "mode": None,
        },
        "extra": True,
    }
    unknown = _schema().prune(obj)
    assert sorted(unknown) == ["extra", "metadata.junk", "spec.closed.gone", "spec.unknown"]
    assert obj["spec"] == {
        "low": 1,
        "free": {"any": {"thing": 1}},
        "closed": {},
        "labels": {"k": "v"},
        "nullable": None,
    }
    assert obj["metadata"] == {"name": "a"}


def test_patch_mode_keeps_nulls_and_directives() -> None:
    doc = {"spec": {"low": None, "$patch": "merge", "bogus": 1}}
    assert _schema().prune(doc, patch=True) == ["spec.bogus"]
    assert doc == {"spec": {"low": None, "$patch": "merge"}}


def test_defaults_apply_recursively() -> None:
    obj: dict[str, Any] = {"spec": {"items": [{"name": "x"}]}}
    _schema().apply_defaults(obj)
    assert obj["spec"] == {"low": 0, "high": 10, "items": [{"name": "x", "size": 1}]}


def _messages(obj: dict[str, Any]) -> dict[str, str]:
    return {e.field: f"{e.type.reason}|{e.body()}" for e in _schema().validate(obj)}


def test_validation_messages() -> None:
    found = _messages(
        {
            "spec": {
                "low": "1",
                "high": 101,
                "mode": "c",
                "ratio": 0,
                "count": True,
                "items": [{"name": "A"}, {"name": "A"}, {}, {"name": "b"}],
            }
        }
    )
    assert (
        found["spec.low"]
        == 'FieldValueTypeInvalid|Invalid value: "1": spec.low in body must be of type '
        'integer: "string"'
    )
    assert (
        found["spec.high"]
        == "FieldValueInvalid|Invalid value: 101: spec.high in body should be less than or "
        "equal to 100"
    )
    assert (
        found["spec.mode"]
        == 'FieldValueNotSupported|Unsupported value: "c": supported values: "a", "b"'
    )
    assert (
        found["spec.ratio"]
        == "FieldValueInvalid|Invalid value: 0: spec.ratio in body should be greater than 0"
    )
    assert found["spec.count"].startswith("FieldValueTypeInvalid|")
    assert found["spec.items"] == "FieldValueTooMany|Too many: 4: must have at most 3 items"
    assert (
        found["spec.items[0].name"]
        == 'FieldValueInvalid|Invalid value: "A": spec.items[0].name in body should match '
        "'^[a-z]+$'"
    )
    assert found["spec.items[1]"].startswith("FieldValueDuplicate|Duplicate value:")
    assert found["spec.items[2].name"] == "FieldValueRequired|Required value"


def test_valid_object_has_no_errors() -> None:
    assert (
        _schema().validate(
            {"spec": {"low": 1, "high": 2, "count": "50%", "items": [{"name": "x"}]}}
        )
        == []
    )


def test_cel_rules_and_transition_rules() -> None:
    rules = RuleChecker(_schema())
    new = {"spec": {"low": 5, "high": 3, "items": [{"name": "xa"}, {"name": "b"}]}}
    errors = {e.field: e for e in rules.check(new)}
    assert errors["spec"].body() == 'Invalid value: "object": low must not exceed high'
    assert errors["spec.items"].type.reason == "FieldValueForbidden"
    assert (
        errors["spec.items"].body()
        == "Forbidden: failed rule: self.items.all(i, i.name.startsWith('x'))"
    )
    # Transition rule: only with an old object.
    old = {"spec": {"low": 1, "high": 9, "items": []}}
    shrink = {"spec": {"low": 1, "high": 8, "items": []}}
    assert [e.body() for e in rules.check(shrink, old)] == [
        'Invalid value: "object": high may only grow'
    ]
    assert rules.check(shrink) == []


def test_cel_macros_and_extensions() -> None:
    schema = Schema(
        {
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "x-kubernetes-validations": [
                        {"rule": "has(self.name) && self.name.lowerAscii() == 'abc'"},
                        {"rule": "self.tags.exists_one(t, t == 'gpu') && size(self.tags) <= 3"},
                        {"rule": "self.tags.filter(t, t.startsWith('g')).size() == 1"},
                        {"rule": "self.name.matches('^[A-Za-z]+$')"},
                    ],
                    "properties": {
                        "name": {"type": "string"},
                        "tags": {"type": "array", "items": {"type": "string"}},
                    },
                }
            },
        }
    )
    checker = RuleChecker(schema)
    assert checker.check({"spec": {"name": "ABC", "tags": ["gpu", "x"]}}) == []
    assert len(checker.check({"spec": {"name": "abd", "tags": ["gpu", "gpu"]}})) == 3


def test_cel_compile_errors_name_the_rule() -> None:
    errs = compile_errors(
        {
            "type": "object",
            "properties": {
                "a": {"type": "string", "x-kubernetes-validations": [{"rule": "self ==="}]}
            },
        },
        "schema",
    )
    assert errs[0].field == "schema.properties[a].x-kubernetes-validations[0].rule"
    assert "compilation failed" in errs[0].detail
