"""RBAC (Role, ClusterRole, RoleBinding, ClusterRoleBinding), PodDisruptionBudget and
NetworkPolicy: served with discovery, OpenAPI, defaults, validation and table output."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Http, Kubectl

RBAC = "/apis/rbac.authorization.k8s.io/v1"
ROLES = f"{RBAC}/namespaces/default/roles"
ROLE_BINDINGS = f"{RBAC}/namespaces/default/rolebindings"
CLUSTER_ROLES = f"{RBAC}/clusterroles"
CLUSTER_ROLE_BINDINGS = f"{RBAC}/clusterrolebindings"
PDBS = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
NETPOLS = "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies"
MERGE = "application/merge-patch+json"
TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}


def _named(name: str, **fields: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, **fields}


READ_PODS = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}


async def test_discovery_lists_the_kinds(http: Http) -> None:
    _, rbac, _ = await http.get(RBAC)
    by_name = {r["name"]: r for r in rbac["resources"]}
    assert {n: by_name[n]["namespaced"] for n in by_name} == {
        "roles": True,
        "rolebindings": True,
        "clusterroles": False,
        "clusterrolebindings": False,
    }
    _, policy, _ = await http.get("/apis/policy/v1")
    names = {r["name"]: r for r in policy["resources"]}
    assert set(names) == {"poddisruptionbudgets", "poddisruptionbudgets/status"}
    assert names["poddisruptionbudgets"]["shortNames"] == ["pdb"]
    _, networking, _ = await http.get("/apis/networking.k8s.io/v1")
    [netpol] = networking["resources"]
    assert (netpol["name"], netpol["shortNames"]) == ("networkpolicies", ["netpol"])
    _, groups, _ = await http.get("/apis")
    served = {g["name"] for g in groups["groups"]}
    assert {"rbac.authorization.k8s.io", "policy", "networking.k8s.io"} <= served


@pytest.mark.parametrize(
    ("path", "definition"),
    [
        ("apis/rbac.authorization.k8s.io/v1", "io.k8s.api.rbac.v1.ClusterRoleBinding"),
        ("apis/policy/v1", "io.k8s.api.policy.v1.PodDisruptionBudget"),
        ("apis/networking.k8s.io/v1", "io.k8s.api.networking.v1.NetworkPolicy"),
    ],
)
async def test_openapi_carries_the_published_schemas(
    http: Http, path: str, definition: str
) -> None:
    _, index, _ = await http.get("/openapi/v3")
    assert path in index["paths"]
    _, doc, _ = await http.get(f"/openapi/v3/{path}")
    schema = doc["components"]["schemas"][definition]
    assert "x-kubernetes-preserve-unknown-fields" not in schema
    assert "metadata" in schema["properties"]


async def test_roles_and_bindings_defaults_and_names(http: Http) -> None:
    # RBAC names only have to be path segments: colons are common ("system:...").
    status, role, _ = await http.post(CLUSTER_ROLES, _named("cdo:reader", rules=[READ_PODS]))
    assert status == 201, role
    assert "generation" not in role["metadata"]
    binding = _named(
        "cdo:reader",
        roleRef={"kind": "ClusterRole", "name": "cdo:reader"},
        subjects=[
            {"kind": "User", "name": "alice"},
            {"kind": "ServiceAccount", "name": "robot", "namespace": "default"},
        ],
    )
    status, created, _ = await http.post(CLUSTER_ROLE_BINDINGS, binding)
    assert status == 201, created
    assert created["roleRef"]["apiGroup"] == "rbac.authorization.k8s.io"
    assert created["subjects"][0]["apiGroup"] == "rbac.authorization.k8s.io"
    assert "apiGroup" not in created["subjects"][1]

    moved = {"roleRef": {"name": "other"}}
    status, body, _ = await http.patch(f"{CLUSTER_ROLE_BINDINGS}/cdo:reader", moved, MERGE)
    assert status == 422
    [cause] = body["details"]["causes"]
    assert (cause["field"], cause["reason"]) == ("roleRef", "FieldValueInvalid")
    assert cause["message"].endswith(": cannot change roleRef")


@pytest.mark.parametrize(
    ("path", "body", "causes"),
    [
        (
            ROLES,
            _named("r", rules=[{"apiGroups": [""], "resources": ["pods"]}]),
            {("rules[0].verbs", "FieldValueRequired")},
        ),
        (
            ROLES,
            _named("r", rules=[{"verbs": ["get"], "nonResourceURLs": ["/logs"]}]),
            {("rules[0].nonResourceURLs", "FieldValueInvalid")},
        ),
        (
            CLUSTER_ROLES,
            _named("c", rules=[{"verbs": ["get"]}]),
            {
                ("rules[0].apiGroups", "FieldValueRequired"),
                ("rules[0].resources", "FieldValueRequired"),
            },
        ),
        (
            CLUSTER_ROLES,
            _named("c", aggregationRule={"clusterRoleSelectors": []}),
            {("aggregationRule.clusterRoleSelectors", "FieldValueRequired")},
        ),
        (
            ROLE_BINDINGS,
            _named("b"),
            {("roleRef.kind", "FieldValueNotSupported"), ("roleRef.name", "FieldValueRequired")},
        ),
        (
            CLUSTER_ROLE_BINDINGS,
            _named(
                "b",
                roleRef={"kind": "Role", "name": "r"},
                subjects=[{"kind": "ServiceAccount", "name": "sa"}, {"kind": "Robot", "name": "x"}],
            ),
            {
                ("roleRef.kind", "FieldValueNotSupported"),
                ("subjects[0].namespace", "FieldValueRequired"),
                ("subjects[1].kind", "FieldValueNotSupported"),
            },
        ),
        (
            PDBS,
            _named("p", spec={"minAvailable": 1, "maxUnavailable": "10%"}),
            {("spec", "FieldValueInvalid")},
        ),
        (
            PDBS,
            _named("p", spec={"minAvailable": "150%", "unhealthyPodEvictionPolicy": "Never"}),
            {
                ("spec.minAvailable", "FieldValueInvalid"),
                ("spec.unhealthyPodEvictionPolicy", "FieldValueNotSupported"),
            },
        ),
        (
            PDBS,
            _named("p", spec={"maxUnavailable": "half"}),
            {("spec.maxUnavailable", "FieldValueInvalid")},
        ),
        (
            NETPOLS,
            _named(
                "n",
                spec={
                    "ingress": [{"from": [{}], "ports": [{"port": 80, "endPort": 70}]}],
                    "egress": [
                        {
                            "to": [
                                {
                                    "ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.1.0.0/24"]},
                                    "podSelector": {},
                                }
                            ]
                        }
                    ],
                    "policyTypes": ["Sideways"],
                },
            ),
            {
                ("spec.ingress[0].from[0]", "FieldValueRequired"),
                ("spec.ingress[0].ports[0].endPort", "FieldValueInvalid"),
                ("spec.egress[0].to[0].ipBlock.except[0]", "FieldValueInvalid"),
                ("spec.egress[0].to[0]", "FieldValueForbidden"),
                ("spec.policyTypes[0]", "FieldValueNotSupported"),
            },
        ),
    ],
)
async def test_validation(http: Http, path: str, body: dict[str, Any], causes: set[Any]) -> None:
    status, result, _ = await http.post(path, body)
    assert status == 422, result
    assert {(c["field"], c["reason"]) for c in result["details"]["causes"]} == causes


async def test_pod_disruption_budget_status_and_generation(http: Http) -> None:
    budget = _named("budget", spec={"maxUnavailable": 1, "selector": {"matchLabels": {"a": "b"}}})
    status, created, _ = await http.post(PDBS, {**budget, "status": {"expectedPods": 9}})
    assert status == 201, created
    assert created["metadata"]["generation"] == 1
    assert created["status"] == {
        "disruptionsAllowed": 0,
        "currentHealthy": 0,
        "desiredHealthy": 0,
        "expectedPods": 0,
    }
    status, body, _ = await http.patch(
        f"{PDBS}/budget/status", {"status": {"disruptionsAllowed": 1, "expectedPods": 2}}, MERGE
    )
    assert status == 200 and body["status"]["disruptionsAllowed"] == 1
    status, body, _ = await http.patch(
        f"{PDBS}/budget/status", {"status": {"currentHealthy": -1}}, MERGE
    )
    assert status == 422 and body["details"]["causes"][0]["field"] == "status.currentHealthy"
    status, body, _ = await http.patch(f"{PDBS}/budget", {"spec": {"maxUnavailable": "50%"}}, MERGE)
    assert status == 200
    assert body["metadata"]["generation"] == 2 and body["status"]["disruptionsAllowed"] == 1


async def test_network_policy_defaults(http: Http) -> None:
    egress = {"to": [{"namespaceSelector": {}}], "ports": [{"port": "dns"}]}
    status, created, _ = await http.post(NETPOLS, _named("deny"))
    assert status == 201, created
    assert created["spec"] == {"podSelector": {}, "policyTypes": ["Ingress"]}
    assert created["metadata"]["generation"] == 1
    status, created, _ = await http.post(NETPOLS, _named("dns", spec={"egress": [egress]}))
    assert status == 201, created
    assert created["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert created["spec"]["egress"][0]["ports"] == [{"port": "dns", "protocol": "TCP"}]


async def test_tables(http: Http) -> None:
    await http.post(CLUSTER_ROLES, _named("viewer", rules=[READ_PODS]))
    binding = _named(
        "viewers",
        roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "viewer"},
        subjects=[
            {"kind": "Group", "name": "ops"},
            {"kind": "ServiceAccount", "name": "robot", "namespace": "tools"},
        ],
    )
    await http.post(ROLE_BINDINGS, binding)
    await http.post(PDBS, _named("budget", spec={"minAvailable": "50%", "selector": {}}))
    selector = {"matchLabels": {"app": "web"}, "matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["b", "a"]},
        {"key": "canary", "operator": "DoesNotExist"},
    ]}  # fmt: skip
    await http.post(NETPOLS, _named("web", spec={"podSelector": selector}))

    async def table(path: str) -> tuple[list[str], list[Any]]:
        status, body, _ = await http.get(path, headers=TABLE)
        assert status == 200, body
        return [c["name"] for c in body["columnDefinitions"]], body["rows"][0]["cells"]

    columns, cells = await table(CLUSTER_ROLES)
    assert columns == ["Name", "Created At"] and cells[0] == "viewer"
    columns, cells = await table(ROLE_BINDINGS)
    assert columns == ["Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"]
    assert cells[:2] == ["viewers", "ClusterRole/viewer"]
    assert cells[3:] == ["", "ops", "tools:robot"]
    columns, cells = await table(PDBS)
    assert columns == ["Name", "Min Available", "Max Unavailable", "Allowed Disruptions", "Age"]
    assert cells[:4] == ["budget", "50%", "N/A", 0]
    columns, cells = await table(NETPOLS)
    assert columns == ["Name", "Pod-Selector", "Age"]
    assert cells[:2] == ["web", "app=web,!canary,tier in (a,b)"]


async def test_kubectl_applies_and_shows_them(kubectl: Kubectl) -> None:
    manifests = """
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: leases}
rules:
- {apiGroups: [coordination.k8s.io], resources: [leases], verbs: [get, update]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: leases}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: leases}
subjects:
- {kind: ServiceAccount, name: controller, namespace: default}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: controller}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: controller}}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: controller}
spec:
  podSelector: {matchLabels: {app: controller}}
  ingress:
  - ports: [{port: 8443}]
"""
    out = await kubectl.ok("apply", "--server-side", "-f", "-", stdin=manifests)
    assert out.count("serverside-applied") == 4, out
    shown = await kubectl.ok("get", "role,rolebinding,pdb,netpol")
    assert "Role/leases" in shown and "app=controller" in shown, shown
    described = await kubectl.ok("describe", "rolebinding", "leases")
    assert "controller" in described
