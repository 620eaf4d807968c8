"""Table tests of RBAC rule matching and of the 403 sentence built from request attributes."""

from __future__ import annotations

from typing import Any

import pytest

from sim.kubeapi.auth import rules
from sim.kubeapi.auth.attributes import Attributes, forbidden, forbidden_message
from sim.kubeapi.auth.identity import UserInfo, split_service_account
from sim.kubeapi.auth.rbac import _reason, subject_key

BOB = UserInfo(name="bob")


def resource(verb: str, res: str, sub: str = "", name: str = "", group: str = "") -> Attributes:
    return Attributes(
        user=BOB, verb=verb, group=group, resource=res, subresource=sub, namespace="ns", name=name
    )


def path(verb: str, url: str) -> Attributes:
    return Attributes(user=BOB, verb=verb, resource_request=False, path=url)


PODS = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}
CASES: list[tuple[str, dict[str, Any], Attributes, bool]] = [
    ("verb listed", PODS, resource("get", "pods"), True),
    ("verb not listed", PODS, resource("delete", "pods"), False),
    ("verb wildcard", {**PODS, "verbs": ["*"]}, resource("delete", "pods"), True),
    ("other group", PODS, resource("get", "pods", group="apps"), False),
    ("group wildcard", {**PODS, "apiGroups": ["*"]}, resource("get", "pods", group="x"), True),
    ("resource does not cover subresource", PODS, resource("get", "pods", "status"), False),
    (
        "subresource listed",
        {**PODS, "resources": ["pods/status"]},
        resource("get", "pods", "status"),
        True,
    ),
    (
        "subresource does not cover resource",
        {**PODS, "resources": ["pods/status"]},
        resource("get", "pods"),
        False,
    ),
    (
        "any resource's subresource",
        {**PODS, "resources": ["*/status"]},
        resource("get", "nodes", "status"),
        True,
    ),
    (
        "*/status is not the main resource",
        {**PODS, "resources": ["*/status"]},
        resource("get", "nodes"),
        False,
    ),
    (
        "pods/* is no wildcard",
        {**PODS, "resources": ["pods/*"]},
        resource("get", "pods", "log"),
        False,
    ),
    ("resource wildcard", {**PODS, "resources": ["*"]}, resource("get", "pods", "exec"), True),
    ("named", {**PODS, "resourceNames": ["a"]}, resource("get", "pods", name="a"), True),
    ("other name", {**PODS, "resourceNames": ["a"]}, resource("get", "pods", name="b"), False),
    ("unnamed request", {**PODS, "resourceNames": ["a"]}, resource("list", "pods"), False),
    ("resource rule, path request", PODS, path("get", "/healthz"), False),
    (
        "exact URL",
        {"nonResourceURLs": ["/healthz"], "verbs": ["get"]},
        path("get", "/healthz"),
        True,
    ),
    (
        "URL prefix",
        {"nonResourceURLs": ["/logs/*"], "verbs": ["get"]},
        path("get", "/logs/a/b"),
        True,
    ),
    (
        "prefix is literal",
        {"nonResourceURLs": ["/logs/*"], "verbs": ["get"]},
        path("get", "/logs"),
        False,
    ),
    ("URL wildcard", {"nonResourceURLs": ["*"], "verbs": ["*"]}, path("post", "/x"), True),
    ("URL verb", {"nonResourceURLs": ["/x"], "verbs": ["get"]}, path("post", "/x"), False),
    (
        "URL rule, resource request",
        {"nonResourceURLs": ["*"], "verbs": ["*"]},
        resource("get", "pods"),
        False,
    ),
    ("not a rule", [], resource("get", "pods"), False),  # type: ignore[list-item]
]


@pytest.mark.parametrize(
    ("rule", "attrs", "allowed"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_rule_allows(rule: dict[str, Any], attrs: Attributes, allowed: bool) -> None:
    assert rules.rule_allows(rule, attrs) is allowed


def test_forbidden_messages() -> None:
    named = resource("update", "pods", "status", name="p")
    assert forbidden_message(named) == (
        'User "bob" cannot update resource "pods/status" in API group "" in the namespace "ns"'
    )
    cluster = Attributes(user=BOB, verb="list", group="apps", resource="deployments")
    err = forbidden(cluster)
    assert err.message == (
        'deployments.apps is forbidden: User "bob" cannot list resource "deployments" in API '
        'group "apps" at the cluster scope'
    )
    assert err.details == {"group": "apps", "kind": "deployments"}
    assert forbidden(path("get", "/x"), "why").message == (
        'forbidden: User "bob" cannot get path "/x": why'
    )


def test_subject_keys_and_reasons() -> None:
    sa = {"kind": "ServiceAccount", "name": "a"}
    assert subject_key(sa, "ns") == ("User", "system:serviceaccount:ns:a")
    assert subject_key({**sa, "namespace": "o"}, "ns") == ("User", "system:serviceaccount:o:a")
    assert subject_key({"kind": "Group", "name": "g"}, "") == ("Group", "g")
    assert subject_key({"kind": "Robot", "name": "r"}, "") is None
    assert _reason([]) == ""
    assert _reason(["x", "x"]) == "RBAC: x"
    assert _reason(["x", "y"]) == "RBAC: [x, y]"
    assert split_service_account("system:serviceaccount:ns:a") == ("ns", "a")
    assert split_service_account("system:serviceaccount:ns") is None
    assert split_service_account("bob") is None
