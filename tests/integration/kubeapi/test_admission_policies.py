"""ValidatingAdmissionPolicy over HTTP: policies compiled when written, bindings, matching,
the CEL variables, the actions, and the real server's error shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from sim.kubeapi import KubeServer, ServerConfig, serve

from .conftest import Http, Kubectl, with_beta_apis


@pytest.fixture
def kube_config() -> ServerConfig:
    """DRA's beta versions served too: some tests here read and write them."""
    return with_beta_apis()


ADMISSION = "/apis/admissionregistration.k8s.io/v1"
POLICIES = f"{ADMISSION}/validatingadmissionpolicies"
BINDINGS = f"{ADMISSION}/validatingadmissionpolicybindings"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
RULES_V1 = "/apis/resource.k8s.io/v1/devicetaintrules"
RULES_V1BETA2 = "/apis/resource.k8s.io/v1beta2/devicetaintrules"
CONFIGMAP_RULE = {
    "apiGroups": [""],
    "apiVersions": ["v1"],
    "operations": ["CREATE", "UPDATE", "DELETE"],
    "resources": ["configmaps"],
}


def policy(name: str, validations: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "matchConstraints": {"resourceRules": [CONFIGMAP_RULE]},
        "validations": validations,
    }
    body.update(spec)
    return {"metadata": {"name": name}, "spec": body}


def binding(name: str, policy_name: str, actions: tuple[str, ...] = ("Deny",), **spec: Any) -> Any:
    return {
        "metadata": {"name": name},
        "spec": {"policyName": policy_name, "validationActions": list(actions), **spec},
    }


def configmap(name: str, labels: dict[str, str] | None = None, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}}, "data": data}


async def install(http: Http, *objects: dict[str, Any]) -> None:
    for obj in objects:
        path = POLICIES if "validations" in obj["spec"] else BINDINGS
        status, body, _ = await http.post(path, obj)
        assert status == 201, body


async def test_a_denial_has_the_real_servers_shape(http: Http) -> None:
    await install(
        http,
        policy("small.example.com", [{"expression": "size(object.data) <= 1"}]),
        binding("small-binding.example.com", "small.example.com"),
    )
    status, body, _ = await http.post(CONFIGMAPS, configmap("big", a="1", b="2"))
    message = (
        "ValidatingAdmissionPolicy 'small.example.com' with binding 'small-binding.example.com' "
        "denied request: failed expression: size(object.data) <= 1"
    )
    assert (status, body) == (
        422,
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f'configmaps "big" is forbidden: {message}',
            "reason": "Invalid",
            "details": {"name": "big", "kind": "configmaps", "causes": [{"message": message}]},
            "code": 422,
        },
    )
    status, _, _ = await http.post(CONFIGMAPS, configmap("small", a="1"))
    assert status == 201


async def test_reason_message_and_message_expression(http: Http) -> None:
    validations = [
        {"expression": "!has(object.data.a)", "reason": "Forbidden", "message": "no a"},
        {
            "expression": "!has(object.data.b)",
            "reason": "RequestEntityTooLarge",
            "message": "ignored when the expression gives one",
            "messageExpression": "'b is ' + object.data.b",
        },
        {"expression": "!has(object.data.c)", "messageExpression": "object.data.c.nope"},
    ]
    await install(http, policy("p", validations), binding("b", "p"))
    for data, code, reason, message in [
        ({"a": "1"}, 403, "Forbidden", "no a"),
        ({"b": "2"}, 413, "RequestEntityTooLarge", "b is 2"),
        # A messageExpression that fails falls back to the expression.
        ({"c": "3"}, 422, "Invalid", "failed expression: !has(object.data.c)"),
    ]:
        status, body, _ = await http.post(CONFIGMAPS, {"metadata": {"name": "x"}, "data": data})
        assert (status, body["reason"], body["code"]) == (code, reason, code), body
        assert body["message"].endswith(f"denied request: {message}"), body


async def test_a_policy_that_does_not_compile_is_refused_naming_the_field(http: Http) -> None:
    cases = [
        ([{"expression": "object.data.a =="}], [], "spec.validations[0].expression"),
        ([{"expression": "true"}, {"expression": "nope.x"}], [], "spec.validations[1].expression"),
        (
            [{"expression": "true", "messageExpression": "variables.missing"}],
            [],
            "spec.validations[0].messageExpression",
        ),
        (
            [{"expression": "true"}],
            [{"name": "v", "expression": "variables.w"}, {"name": "w", "expression": "1"}],
            "spec.variables[0].expression",
        ),
    ]
    for validations, variables, field in cases:
        body = policy("bad", validations, variables=variables)
        status, out, _ = await http.post(POLICIES, body)
        assert status == 422, out
        assert out["reason"] == "Invalid"
        assert [c["field"] for c in out["details"]["causes"]] == [field], out
        assert "compilation failed" in out["message"], out
    status, out, _ = await http.post(POLICIES, policy("empty", []))
    assert status == 422 and out["details"]["causes"][0]["field"] == "spec.validations", out
    status, out, _ = await http.post(BINDINGS, binding("both", "p", actions=("Deny", "Warn")))
    assert status == 422 and "must not contain both Deny and Warn" in out["message"], out
    status, out, _ = await http.post(BINDINGS, {"metadata": {"name": "x"}, "spec": {}})
    assert status == 422
    assert [c["field"] for c in out["details"]["causes"]] == [
        "spec.policyName",
        "spec.validationActions",
    ]


async def test_a_binding_without_its_policy_and_a_policy_without_binding_do_nothing(
    http: Http,
) -> None:
    deny_all = policy("deny-all", [{"expression": "false"}])
    await install(http, binding("orphan", "no-such-policy"), deny_all)
    status, _, _ = await http.post(CONFIGMAPS, configmap("free"))
    assert status == 201
    await install(http, binding("bound", "deny-all"))
    status, _, _ = await http.post(CONFIGMAPS, configmap("caught"))
    assert status == 422
    status, _, _ = await http.delete(f"{BINDINGS}/bound")
    assert status == 200
    status, _, _ = await http.post(CONFIGMAPS, configmap("free-again"))
    assert status == 201


async def test_warn_and_audit(kube: KubeServer, http: Http) -> None:
    await install(
        http,
        policy("p", [{"expression": "false", "message": "not liked"}]),
        binding("warns", "p", actions=("Warn", "Audit")),
    )
    status, _, headers = await http.post(CONFIGMAPS, configmap("warned"))
    assert status == 201
    assert headers.getall("Warning") == [
        "299 - \"Validation failed for ValidatingAdmissionPolicy 'p' with binding 'warns': "
        'not liked"'
    ]
    records = list(kube.api.engine.admission.policies.audit_records)
    assert [r.annotation() for r in records] == [
        (
            "validation.policy.admission.k8s.io/validation_failure",
            '[{"message":"not liked","policy":"p","binding":"warns","expressionIndex":0,'
            '"validationActions":["Warn","Audit"]}]',
        )
    ]


async def test_an_audit_log_holds_a_line_per_audited_request(tmp_path: Path) -> None:
    """With ``audit_log``, each request a policy audited is one audit.k8s.io Event line with
    the user, the object, every failure and, when denied, the denial; others are not logged."""
    log = tmp_path / "logs" / "audit.log"
    config = ServerConfig(audit_log=str(log))
    async with (
        serve(config=config, kubeconfig=tmp_path / "kubeconfig") as server,
        aiohttp.ClientSession() as session,
    ):
        http = Http(session, server.url)
        await install(
            http,
            policy("audited", [{"expression": "object.metadata.name != 'bad'", "message": "no"}]),
            binding("deny-and-audit", "audited", actions=("Deny", "Audit")),
            binding("audit-only", "audited", actions=("Audit",)),
        )
        status, _, _ = await http.post(CONFIGMAPS, configmap("good"))
        assert status == 201
        assert not log.exists()
        status, body, _ = await http.post(CONFIGMAPS, configmap("bad"))
        assert status == 422
    (line,) = log.read_text().splitlines()
    event = json.loads(line)
    assert (event["apiVersion"], event["kind"], event["level"]) == (
        "audit.k8s.io/v1",
        "Event",
        "Metadata",
    )
    assert event["verb"] == "create"
    assert event["user"]["username"] == "system:admin"
    assert event["objectRef"] == {
        "resource": "configmaps",
        "namespace": "default",
        "name": "bad",
        "apiGroup": "",
        "apiVersion": "v1",
        "subresource": "",
    }
    failures = json.loads(
        event["annotations"]["validation.policy.admission.k8s.io/validation_failure"]
    )
    assert sorted((f["binding"], f["validationActions"]) for f in failures) == [
        ("audit-only", ["Audit"]),
        ("deny-and-audit", ["Deny", "Audit"]),
    ]
    assert event["responseStatus"]["code"] == 422
    assert event["responseStatus"]["message"] == body["message"]
    assert "ValidatingAdmissionPolicy 'audited' with binding 'deny-and-audit'" in body["message"]


async def test_the_request_object_and_old_object_variables(http: Http) -> None:
    validations = [
        # CREATE: no oldObject; UPDATE: both; DELETE: no object.
        {
            "expression": "request.operation != 'CREATE' || (oldObject == null && object != null)",
            "message": "create",
        },
        {
            "expression": "request.operation != 'UPDATE' || "
            "(object.data.v != oldObject.data.v && request.name == 'cm')",
            "message": "update",
        },
        {
            "expression": "request.operation != 'DELETE' || "
            "(object == null && oldObject.data.v == 'keep-me')",
            "message": "delete",
        },
        {
            "expression": "request.namespace == namespaceObject.metadata.name && "
            "request.userInfo.username == 'system:admin' && request.subResource == '' && "
            "request.kind.kind == 'ConfigMap' && request.resource.resource == 'configmaps' && "
            "request.options.kind.endsWith('Options') && params == null",
            "message": "request",
        },
        {"expression": "variables.twice == variables.value + variables.value", "message": "vars"},
        {"expression": "!request.dryRun || object.data.v != 'dry'", "message": "dry run"},
    ]
    variables = [
        {"name": "value", "expression": "object != null ? object.data.v : oldObject.data.v"},
        {"name": "twice", "expression": "variables.value + variables.value"},
    ]
    await install(http, policy("p", validations, variables=variables), binding("b", "p"))
    status, out, _ = await http.post(CONFIGMAPS, configmap("cm", v="dry"), params={"dryRun": "All"})
    assert status == 422 and out["message"].endswith("denied request: dry run"), out
    status, body, _ = await http.post(CONFIGMAPS, configmap("cm", v="one"))
    assert status == 201, body
    body["data"]["v"] = "two"
    status, body, _ = await http.put(f"{CONFIGMAPS}/cm", body)
    assert status == 200, body
    status, out, _ = await http.delete(f"{CONFIGMAPS}/cm")
    assert status == 422 and out["message"].endswith("denied request: delete"), out
    # A denied DELETE names no object: the real server says "Unknown".
    assert out["details"]["name"] == "Unknown"
    body["data"]["v"] = "keep-me"
    status, body, _ = await http.put(f"{CONFIGMAPS}/cm", body)
    assert status == 200, body
    status, out, _ = await http.delete(f"{CONFIGMAPS}/cm")
    assert status == 200, out


async def test_match_conditions_failure_policy_and_evaluation_errors(http: Http) -> None:
    conditions = [{"name": "labelled", "expression": "has(object.metadata.labels.checked)"}]
    failing = [{"expression": "object.data.missing == 'x'"}]
    await install(
        http,
        policy("strict", failing, matchConditions=conditions),
        binding("strict-b", "strict"),
    )
    status, _, _ = await http.post(CONFIGMAPS, configmap("unchecked"))
    assert status == 201  # the match condition is false: the policy does not apply
    status, out, _ = await http.post(CONFIGMAPS, configmap("checked", {"checked": "y"}))
    assert status == 422, out
    assert out["message"].endswith(
        "denied request: expression 'object.data.missing == 'x'' resulted in error: "
        "no such member in mapping: 'missing'"
    ), out
    status, _, _ = await http.delete(f"{BINDINGS}/strict-b")
    await install(
        http,
        policy("lenient", failing, failurePolicy="Ignore"),
        binding("lenient-b", "lenient"),
    )
    status, _, _ = await http.post(CONFIGMAPS, configmap("checked", {"checked": "y"}))
    assert status == 201


async def test_selectors_exclusions_and_resource_names(http: Http) -> None:
    constraints = {
        "resourceRules": [{**CONFIGMAP_RULE, "resourceNames": ["named", "excluded"]}],
        "excludeResourceRules": [{**CONFIGMAP_RULE, "resourceNames": ["excluded"]}],
    }
    await install(
        http,
        policy("p", [{"expression": "false"}], matchConstraints=constraints),
        binding(
            "b",
            "p",
            matchResources={"objectSelector": {"matchLabels": {"tier": "x"}}},
        ),
    )
    for name, labels, code in [
        ("named", {"tier": "x"}, 422),
        ("named2", {"tier": "x"}, 201),  # not a listed name
        ("excluded", {"tier": "x"}, 201),  # excluded
    ]:
        status, out, _ = await http.post(CONFIGMAPS, configmap(name, labels))
        assert status == code, (name, out)
    status, _, _ = await http.post(CONFIGMAPS, configmap("named", {"tier": "y"}))
    assert status == 201  # the binding's object selector does not pick it


async def test_match_policy_equivalent_and_exact(http: Http) -> None:
    rule = {
        "apiGroups": ["resource.k8s.io"],
        "apiVersions": ["v1"],
        "operations": ["CREATE"],
        "resources": ["devicetaintrules"],
    }
    validations = [{"expression": "request.kind.version == 'v1' && false", "message": "v1 form"}]
    taint_rule = {
        "metadata": {"name": "r"},
        "spec": {"taint": {"key": "k", "effect": "NoSchedule"}},
    }
    await install(
        http,
        policy(
            "equivalent",
            validations,
            matchConstraints={"resourceRules": [rule], "matchPolicy": "Equivalent"},
        ),
        binding("eb", "equivalent"),
    )
    # Served as v1beta2, matched (and shown to CEL) as v1.
    status, out, _ = await http.post(RULES_V1BETA2, taint_rule)
    assert status == 422 and out["message"].endswith("denied request: v1 form"), out
    status, _, _ = await http.delete(f"{BINDINGS}/eb")
    await install(
        http,
        policy(
            "exact",
            validations,
            matchConstraints={"resourceRules": [rule], "matchPolicy": "Exact"},
        ),
        binding("xb", "exact"),
    )
    status, _, _ = await http.post(RULES_V1BETA2, taint_rule)
    assert status == 201
    status, _, _ = await http.post(RULES_V1, {**taint_rule, "metadata": {"name": "r2"}})
    assert status == 422


async def test_subresources_and_namespace_selectors(http: Http) -> None:
    await http.post("/api/v1/namespaces", {"metadata": {"name": "guarded", "labels": {"g": "1"}}})
    constraints = {
        "resourceRules": [
            {
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "operations": ["UPDATE"],
                "resources": ["pods/status"],
            }
        ],
        "namespaceSelector": {"matchLabels": {"g": "1"}},
    }
    await install(
        http,
        policy(
            "p",
            [{"expression": "request.subResource == 'status' && false", "message": "status"}],
            matchConstraints=constraints,
        ),
        binding("b", "p"),
    )
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    for namespace, code in [("guarded", 422), ("default", 200)]:
        path = f"/api/v1/namespaces/{namespace}/pods"
        status, created, _ = await http.post(path, pod)
        assert status == 201, created
        patch = {"status": {"phase": "Running"}}
        status, out, _ = await http.patch(
            f"{path}/p/status", patch, content_type="application/merge-patch+json"
        )
        assert status == code, (namespace, out)
        # The object itself is not the status subresource: not matched.
        status, out, _ = await http.patch(
            f"{path}/p",
            {"metadata": {"labels": {"a": "b"}}},
            content_type="application/merge-patch+json",
        )
        assert status == 200, out


async def test_kubectl_prints_an_invalid_denial(http: Http, kubectl: Kubectl) -> None:
    await install(
        http,
        policy("small.example.com", [{"expression": "size(object.data) <= 1"}]),
        binding("small-binding.example.com", "small.example.com"),
    )
    rc, _, err = await kubectl(
        "create", "configmap", "big", "--from-literal=a=1", "--from-literal=b=2"
    )
    assert rc == 1
    assert err.strip() == (
        'error: failed to create configmap: configmaps "big" is forbidden: '
        "ValidatingAdmissionPolicy 'small.example.com' with binding 'small-binding.example.com' "
        "denied request: failed expression: size(object.data) <= 1"
    )
    listed = await kubectl.ok("get", "validatingadmissionpolicies")
    assert listed.split("\n")[0].split() == ["NAME", "VALIDATIONS", "PARAMKIND", "AGE"]
    assert listed.split("\n")[1].split()[:3] == ["small.example.com", "1", "<unset>"]
    listed = await kubectl.ok("get", "validatingadmissionpolicybindings")
    assert listed.split("\n")[1].split()[:3] == [
        "small-binding.example.com",
        "small.example.com",
        "<unset>",
    ]
    manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata: {a: '1', b: '2'}\n"
    rc, _, err = await kubectl("apply", "-f", "-", stdin=manifest)
    assert rc == 1
    assert err.strip() == (
        "The configmaps \"big\" is invalid: : ValidatingAdmissionPolicy 'small.example.com' "
        "with binding 'small-binding.example.com' denied request: failed expression: "
        "size(object.data) <= 1"
    )


async def test_policies_and_bindings_themselves_are_exempt(http: Http) -> None:
    everything = {
        "resourceRules": [
            {"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]}
        ]
    }
    await install(
        http,
        policy("deny-all", [{"expression": "false"}], matchConstraints=everything),
        binding("deny-all", "deny-all"),
    )
    status, _, _ = await http.post(CONFIGMAPS, configmap("caught"))
    assert status == 422
    # Otherwise a policy could lock itself in: its own binding can still go.
    await install(http, policy("another", [{"expression": "true"}]))
    status, _, _ = await http.delete(f"{BINDINGS}/deny-all")
    assert status == 200
    status, _, _ = await http.post(CONFIGMAPS, configmap("free"))
    assert status == 201


async def test_a_binding_evaluates_its_policy_once_per_parameter_resource(http: Http) -> None:
    kind = {"apiVersion": "v1", "kind": "ConfigMap"}
    # A ConfigMap labelled "limit" caps how many keys the others of its namespace may hold.
    capped = "!has(object.metadata.labels) || !('limit' in object.metadata.labels)"
    rule = f"{capped} ? size(object.data) <= int(params.data.max) : true"
    await install(
        http,
        policy(
            "with-params",
            [{"expression": rule, "messageExpression": "'at most ' + params.data.max"}],
            paramKind=kind,
        ),
        # A binding without a paramRef: the policy runs with params null, as upstream.
        binding("plain", "with-params"),
    )
    status, out, _ = await http.post(CONFIGMAPS, configmap("one", a="1"))
    assert status == 422  # params is null: reading its data is an error, denied (Fail)
    assert f"denied request: expression '{rule}' resulted in error" in out["message"], out
    status, _, _ = await http.delete(f"{BINDINGS}/plain")
    assert status == 200

    selector = {"matchLabels": {"limit": "yes"}}
    ref = {"selector": selector, "parameterNotFoundAction": "Allow"}
    await install(http, binding("per-namespace", "with-params", paramRef=ref))
    # No parameter in the namespace, and Allow: admitted.
    status, _, _ = await http.post(CONFIGMAPS, configmap("free", a="1", b="2", c="3"))
    assert status == 201
    for name, most in (("limit-a", "2"), ("limit-b", "1")):
        status, _, _ = await http.post(CONFIGMAPS, configmap(name, {"limit": "yes"}, max=most))
        assert status == 201
    # Evaluated once per parameter (namespace of the object): the strictest one denies.
    status, out, _ = await http.post(CONFIGMAPS, configmap("two", a="1", b="2"))
    assert status == 422, out
    assert out["message"].endswith(
        "ValidatingAdmissionPolicy 'with-params' with binding 'per-namespace' denied request: "
        "at most 1"
    )
    status, _, _ = await http.post(CONFIGMAPS, configmap("small", a="1"))
    assert status == 201
    # Another namespace has no parameter: admitted.
    other = "/api/v1/namespaces/kube-system/configmaps"
    status, _, _ = await http.post(other, configmap("elsewhere", a="1", b="2"))
    assert status == 201

    # A named parameter that is not there, with Deny: a configuration error.
    ref = {"name": "absent", "parameterNotFoundAction": "Deny"}
    await install(http, binding("missing", "with-params", paramRef=ref))
    status, out, _ = await http.post(CONFIGMAPS, configmap("three", a="1"))
    assert status == 422, out
    assert out["message"].endswith(
        "ValidatingAdmissionPolicy 'with-params' with binding 'missing' denied request: "
        "failed to configure binding: no params found for policy binding with `Deny` "
        "parameterNotFoundAction"
    )


async def test_a_parameter_kind_the_server_does_not_serve_follows_the_failure_policy(
    http: Http,
) -> None:
    kind = {"apiVersion": "example.com/v1", "kind": "Nothing"}
    ref = {"selector": {}, "parameterNotFoundAction": "Allow"}
    await install(
        http,
        policy("unknown-kind", [{"expression": "false"}], paramKind=kind),
        binding("unknown-kind", "unknown-kind", paramRef=ref),
    )
    status, out, _ = await http.post(CONFIGMAPS, configmap("blocked"))
    assert status == 422
    assert "failed to configure binding: paramKind kind" in out["message"]
    assert "not known" in out["message"]
    status, current, _ = await http.get(f"{POLICIES}/unknown-kind")
    current["spec"]["failurePolicy"] = "Ignore"
    status, _, _ = await http.put(f"{POLICIES}/unknown-kind", current)
    assert status == 200
    status, _, _ = await http.post(CONFIGMAPS, configmap("let-through"))
    assert status == 201
