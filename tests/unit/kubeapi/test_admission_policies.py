"""ValidatingAdmissionPolicy pieces: the CEL environment and its create-time checks, request
matching, the decisions of one policy, the denial's shape, and the kinds' validation."""

from __future__ import annotations

from typing import Any

import pytest

from sim.kubeapi.admission.matching import AdmissionRequest, rule_matches
from sim.kubeapi.admission.policies import (
    Decision,
    denial,
    evaluate,
    match_target,
    reason_code,
    request_variable,
)
from sim.kubeapi.kinds import register_builtins
from sim.kubeapi.kinds.admissionpolicies import (
    ValidatingAdmissionPolicyBindingStrategy,
    ValidatingAdmissionPolicyStrategy,
)
from sim.kubeapi.releases import Release
from sim.kubeapi.storage.resources import Registry, ResourceType
from sim.kubeapi.validation import policy_cel
from sim.kubeapi.validation.policy_cel import Activation, EvaluationError, Variable


@pytest.fixture(scope="module")
def registry() -> Registry:
    """The built-in types with DRA's beta versions served too (a type served at two versions)."""
    out = Registry()
    register_builtins(out, Release.of(runtime_config={"api/beta": True}))
    return out


def rt(registry: Registry, group: str, version: str, plural: str) -> ResourceType:
    found = registry.get(group, version, plural)
    assert found is not None
    return found


def request(
    resource: ResourceType, operation: str = "UPDATE", name: str = "n", subresource: str = ""
) -> AdmissionRequest:
    obj = {"metadata": {"name": name, "labels": {"tier": "x"}}}
    return AdmissionRequest(
        rt=resource,
        operation=operation,
        namespace="",
        name=name,
        obj=obj,
        old=obj,
        subresource=subresource,
    )


# -- the CEL environment ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "declared", "problem"),
    [
        ("object.metadata.name == 'x'", [], ""),
        ("object.metadata.labels.all(k, k.startsWith('a'))", [], ""),  # k is bound by all()
        ("[1, 2].map(x, x * 2).exists(y, y > 2)", [], ""),
        ("variables.a + 1", ["a"], ""),
        ("oldObject == null && request.name != '' && namespaceObject == null", [], ""),
        ("params == null", [], ""),
        ("object.spec.replicas <", [], "ERROR: <input>:1:22: Syntax error"),
        ("self.x", [], "undeclared reference to 'self'"),
        ("k.startsWith('a')", [], "undeclared reference to 'k'"),  # k is not bound here
        ("variables.b", ["a"], "undefined field 'b'"),
        ("authorizer.group('').resource('x').check('get').allowed()", [], "not supported"),
    ],
)
def test_check(expression: str, declared: list[str], problem: str) -> None:
    found = policy_cel.check(expression, declared)
    if problem:
        assert problem in found
    else:
        assert found == ""


def test_variables_evaluate_in_order_and_fail_only_their_readers() -> None:
    activation = Activation(
        {"object": {"a": 2}, "oldObject": None},
        [
            Variable("double", "object.a * 2"),
            Variable("broken", "object.missing"),
            Variable("quad", "variables.double * 2"),
        ],
    )
    assert activation.admits("variables.quad == 8")
    with pytest.raises(EvaluationError) as raised:
        activation.admits("variables.broken == 1")
    assert str(raised.value) == (
        "expression 'variables.broken == 1' resulted in error: composited variable \"broken\" "
        "fails to evaluate: no such member in mapping: 'missing'"
    )


def test_results_and_messages() -> None:
    activation = Activation({"object": {"a": 1, "s": "multi\nline"}}, [])
    assert not activation.admits("object.a")  # anything but true denies a validation
    with pytest.raises(EvaluationError, match="should be bool"):
        activation.condition("object.a")  # a match condition must be a bool
    assert activation.message("'a is ' + string(object.a)") == "a is 1"
    assert activation.message("object.s") == ""  # line breaks: the fallback is used
    assert activation.message("object.a") == ""  # not a string
    assert activation.message("object.nope") == ""  # an error
    assert activation.admits("object != null && null == oldObject") is False  # oldObject unset


def test_comparisons_with_null_of_any_type() -> None:
    activation = Activation({"object": {"a": 1}, "oldObject": None}, [])
    assert activation.admits("object != null && oldObject == null && 1 != null && [1] != null")


def test_the_request_variable_has_empty_fields() -> None:
    registry = Registry()
    register_builtins(registry)
    nodes = rt(registry, "", "v1", "nodes")
    req = request(nodes, subresource="")
    req.user = {"username": "u"}
    body = request_variable(req, nodes)
    assert body["subResource"] == "" and body["namespace"] == ""
    assert body["userInfo"] == {"username": "u", "uid": "", "groups": [], "extra": {}}
    assert body["resource"] == {"group": "", "version": "v1", "resource": "nodes"}
    assert "object" not in body


# -- matching -----------------------------------------------------------------------------------


NODE_RULE = {
    "apiGroups": [""],
    "apiVersions": ["v1"],
    "operations": ["UPDATE"],
    "resources": ["nodes"],
}


@pytest.mark.parametrize(
    ("rule", "subresource", "matched"),
    [
        (NODE_RULE, "", True),
        (NODE_RULE, "status", False),  # "nodes" is the object, not its subresources
        ({**NODE_RULE, "resources": ["nodes/status"]}, "status", True),
        ({**NODE_RULE, "resources": ["nodes/status"]}, "", False),
        ({**NODE_RULE, "resources": ["nodes/*"]}, "status", True),
        ({**NODE_RULE, "resources": ["*/*"]}, "status", True),
        ({**NODE_RULE, "resources": ["*"]}, "status", False),
        ({**NODE_RULE, "operations": ["CREATE"]}, "", False),
        ({**NODE_RULE, "operations": ["*"]}, "", True),
        ({**NODE_RULE, "apiGroups": ["apps"]}, "", False),
        ({**NODE_RULE, "scope": "Namespaced"}, "", False),
        ({**NODE_RULE, "scope": "Cluster"}, "", True),
        ({**NODE_RULE, "resourceNames": ["n"]}, "", True),
        ({**NODE_RULE, "resourceNames": ["other"]}, "", False),
    ],
)
def test_rule_matches(
    registry: Registry, rule: dict[str, Any], subresource: str, matched: bool
) -> None:
    nodes = rt(registry, "", "v1", "nodes")
    assert rule_matches(rule, request(nodes, subresource=subresource), nodes) is matched


def test_match_target_excludes_selects_and_finds_equivalent_versions(registry: Registry) -> None:
    nodes = rt(registry, "", "v1", "nodes")

    def no_labels(_: str) -> dict[str, str] | None:
        return None

    req = request(nodes)
    assert match_target({"resourceRules": [NODE_RULE]}, req, registry, no_labels) is nodes
    excluded = {"resourceRules": [NODE_RULE], "excludeResourceRules": [NODE_RULE]}
    assert match_target(excluded, req, registry, no_labels) is None
    # A binding without rules matches whatever its policy matched.
    assert match_target({}, req, registry, no_labels) is nodes
    assert (
        match_target({"objectSelector": {"matchLabels": {"tier": "y"}}}, req, registry, no_labels)
        is None
    )
    # Cluster-scoped objects are not in a namespace a selector could pick.
    assert (
        match_target({"namespaceSelector": {"matchLabels": {"a": "b"}}}, req, registry, no_labels)
        is nodes
    )
    v1 = rt(registry, "resource.k8s.io", "v1", "devicetaintrules")
    v1beta2 = rt(registry, "resource.k8s.io", "v1beta2", "devicetaintrules")
    rule = {
        "apiGroups": ["resource.k8s.io"],
        "apiVersions": ["v1"],
        "operations": ["UPDATE"],
        "resources": ["devicetaintrules"],
    }
    served = request(v1beta2)
    assert match_target({"resourceRules": [rule]}, served, registry, no_labels) is v1
    exact = {"resourceRules": [rule], "matchPolicy": "Exact"}
    assert match_target(exact, served, registry, no_labels) is None


# -- decisions and the denial -------------------------------------------------------------------


def decisions(spec: dict[str, Any], inputs: dict[str, Any]) -> list[Decision]:
    return list(evaluate(spec, Activation(inputs, [])))


def test_decisions_of_one_policy() -> None:
    spec = {
        "matchConditions": [{"name": "c", "expression": "object.kind == 'A'"}],
        "validations": [
            {"expression": "object.n < 2", "reason": "Forbidden", "message": " too many "},
            {"expression": "object.n < 3"},
            {"expression": "object.missing"},
        ],
    }
    assert decisions(spec, {"object": {"kind": "B", "n": 5}}) == []
    found = decisions(spec, {"object": {"kind": "A", "n": 5}})
    assert found == [
        Decision(message="too many", reason="Forbidden", index=0),
        Decision(message="failed expression: object.n < 3", reason="Invalid", index=1),
        Decision(
            message="expression 'object.missing' resulted in error: no such member in mapping: "
            "'missing'",
            index=2,
        ),
    ]
    ignoring = {**spec, "failurePolicy": "Ignore"}
    assert [d.index for d in decisions(ignoring, {"object": {"kind": "A", "n": 5}})] == [0, 1]
    broken_condition = {**spec, "matchConditions": [{"name": "c", "expression": "object.nope"}]}
    assert [d.index for d in decisions(broken_condition, {"object": {"n": 0}})] == [0]
    assert decisions({**broken_condition, "failurePolicy": "Ignore"}, {"object": {"n": 0}}) == []


def test_the_denial(registry: Registry) -> None:
    slices = rt(registry, "resource.k8s.io", "v1", "resourceslices")
    err = denial(request(slices, name="s"), "p", "b", Decision(message="no", reason="Forbidden"))
    message = "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: no"
    assert err.status() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'resourceslices.resource.k8s.io "s" is forbidden: {message}',
        "reason": "Forbidden",
        "details": {
            "name": "s",
            "group": "resource.k8s.io",
            "kind": "resourceslices",
            "causes": [{"message": message}],
        },
        "code": 403,
    }
    deleting = request(slices, operation="DELETE")
    deleting.obj = None
    assert denial(deleting, "p", "b", Decision(message="no")).details == {
        "name": "Unknown",
        "group": "resource.k8s.io",
        "kind": "resourceslices",
        "causes": [{"message": message}],
    }
    assert [reason_code(r) for r in ("Forbidden", "Unauthorized", "RequestEntityTooLarge")] == [
        403,
        401,
        413,
    ]
    assert reason_code("Invalid") == reason_code("Anything") == 422


# -- the kinds ----------------------------------------------------------------------------------


def fields(errors: list[Any]) -> list[str]:
    return [e.field for e in errors]


def test_policy_defaults_and_validation() -> None:
    strategy = ValidatingAdmissionPolicyStrategy()
    good: dict[str, Any] = {
        "spec": {
            "matchConstraints": {"resourceRules": [NODE_RULE]},
            "variables": [{"name": "n", "expression": "object.metadata.name"}],
            "matchConditions": [{"name": "example.com/c", "expression": "true"}],
            "validations": [{"expression": "variables.n != ''", "reason": "Forbidden"}],
        }
    }
    strategy.default(good)
    assert good["spec"]["failurePolicy"] == "Fail"
    constraints = good["spec"]["matchConstraints"]
    assert constraints["matchPolicy"] == "Equivalent"
    assert constraints["namespaceSelector"] == constraints["objectSelector"] == {}
    assert constraints["resourceRules"][0]["scope"] == "*"
    assert strategy.validate(good) == []
    bad = {
        "spec": {
            "failurePolicy": "Sometimes",
            "matchConstraints": {"resourceRules": [{**NODE_RULE, "operations": ["GET"]}]},
            "variables": [{"name": "not an identifier", "expression": "1"}],
            "matchConditions": [{"name": "c", "expression": "1 +"}],
            "validations": [{"expression": "true", "reason": "Teapot", "message": "a\nb"}],
        }
    }
    assert fields(strategy.validate(bad)) == [
        "spec.matchConstraints.resourceRules[0].operations",
        "spec.failurePolicy",
        "spec.variables[0].name",
        "spec.matchConditions[0].expression",
        "spec.validations[0].message",
        "spec.validations[0].reason",
    ]
    unmatched: dict[str, Any] = {"spec": {"validations": [{"expression": "true"}]}}
    strategy.default(unmatched)
    assert fields(strategy.validate(unmatched)) == ["spec.matchConstraints"]


def test_binding_validation() -> None:
    strategy = ValidatingAdmissionPolicyBindingStrategy()
    good = {"spec": {"policyName": "p", "validationActions": ["Warn", "Audit"]}}
    assert strategy.validate(good) == []
    bad = {"spec": {"policyName": "p", "validationActions": ["Deny", "Deny", "Shout"]}}
    assert fields(strategy.validate(bad)) == [
        "spec.validationActions[1]",
        "spec.validationActions[2]",
    ]


def test_results_depend_on_the_values_read_and_nothing_else() -> None:
    # Results are kept by expression and the values at the paths it reads: a request that
    # differs only elsewhere gets the kept result, one that differs there is evaluated.
    text = "request.userInfo.username in ['a', 'b'] && variables.flag == true"
    assert policy_cel.references(text).paths == (
        ("request", "userInfo", "username"),
        ("variables", "flag"),
    )
    flag = [Variable("flag", "object.f")]
    for username, value, expected in [
        ("a", True, True),
        ("c", True, False),
        ("a", False, False),
        ("a", 1, None),  # 1 is not true: an error (no == between int and bool)
    ]:
        request = {"uid": username, "userInfo": {"username": username}}
        activation = Activation({"object": {"f": value}, "request": request}, flag)
        if expected is None:
            with pytest.raises(EvaluationError):
                activation.condition(text)
        else:
            assert activation.condition(text) is expected
