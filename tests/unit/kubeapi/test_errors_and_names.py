"""Status shapes, field error rendering and name validation."""

from __future__ import annotations

from sim.kubeapi.machinery import errors, names
from sim.kubeapi.machinery.jsonpath import compile_path, evaluate, first
from sim.kubeapi.storage.columns import human_duration


def test_invalid_status_shape() -> None:
    err = errors.invalid_object(
        "Deployment",
        "apps",
        "web",
        [
            errors.required("spec.selector"),
            errors.invalid("spec.replicas", -1, "must be greater than or equal to 0"),
        ],
    )
    assert err.code == 422
    assert err.message == (
        'Deployment.apps "web" is invalid: [spec.selector: Required value, '
        "spec.replicas: Invalid value: -1: must be greater than or equal to 0]"
    )
    assert err.status()["details"] == {
        "name": "web",
        "group": "apps",
        "kind": "Deployment",
        "causes": [
            {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.selector"},
            {
                "reason": "FieldValueInvalid",
                "message": "Invalid value: -1: must be greater than or equal to 0",
                "field": "spec.replicas",
            },
        ],
    }


def test_resource_errors() -> None:
    assert errors.not_found("deployments", "apps", "x").message == 'deployments.apps "x" not found'
    assert errors.conflict("pods", "", "p").status()["details"] == {"name": "p", "kind": "pods"}
    too_many = errors.too_many_requests("slow down", 5)
    assert too_many.headers == {"Retry-After": "5"} and too_many.status()["details"] == {
        "retryAfterSeconds": 5
    }
    assert errors.internal_error("boom").message == "Internal error occurred: boom"


def test_field_error_values() -> None:
    assert (
        str(errors.not_supported("spec.mode", "x", ["a", "b"]))
        == 'spec.mode: Unsupported value: "x": supported values: "a", "b"'
    )
    assert (
        str(errors.duplicate("spec.items[1]", {"name": "a"}))
        == 'spec.items[1]: Duplicate value: {"name":"a"}'
    )
    assert str(errors.forbidden("spec", "nope")) == "spec: Forbidden: nope"


def test_names() -> None:
    assert names.dns1123_label("ok-name") == []
    assert names.dns1123_label("Bad") != []
    assert names.dns1123_subdomain("a.b-c") == []
    assert names.qualified_name("example.com/Key_1") == []
    assert names.qualified_name("-bad") != []
    assert names.label_value("") == []
    assert names.label_value("x" * 64) != []


def test_jsonpath_subset() -> None:
    obj = {
        "status": {
            "conditions": [{"type": "A", "status": "False"}, {"type": "Ready", "status": "True"}]
        },
        "spec": {"items": [{"n": 1}, {"n": 2}]},
    }
    assert first('.status.conditions[?(@.type=="Ready")].status', obj) == "True"
    assert evaluate(compile_path(".spec.items[*].n"), obj) == [1, 2]
    assert first("{.spec.items[1].n}", obj) == 2
    assert first(".missing.path", obj) is None


def test_human_durations() -> None:
    assert [human_duration(s) for s in (5, 119, 125, 3 * 3600 + 60, 50 * 3600, 30 * 86400)] == [
        "5s",
        "119s",
        "2m5s",
        "3h1m",
        "2d2h",
        "30d",
    ]
