"""RBAC with enforcement on: the 403 bodies of the real server, rules with resourceNames,
subresources, wildcards and nonResourceURLs, group subjects, bindings taking effect and
ceasing at once, the bootstrap roles, and the access reviews (also through kubectl)."""

from __future__ import annotations

from typing import Any

import pytest

from sim.kubeapi import KubeServer, ServerConfig

from .auth_helpers import (
    ENFORCED,
    NS,
    RBAC,
    admin,
    bearer,
    grant,
    ok,
    pod,
    sa_subject,
    service_account,
    token,
)
from .conftest import Kubectl

USER = "system:serviceaccount:default:agent"
SAR = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


@pytest.fixture
def kube_config() -> ServerConfig:
    return ENFORCED


@pytest.fixture
async def agent(kube: KubeServer) -> str:
    """A token of ServiceAccount default/agent, which nothing is granted to yet."""
    async with admin(kube) as http:
        await service_account(http, "agent")
        await pod(http, "p1", sa="agent")
        await pod(http, "p2", sa="agent")
        return await token(http, "agent")


async def status_of(kube: KubeServer, jwt: str, method: str, path: str, body: Any = None) -> int:
    async with bearer(kube, jwt) as http:
        status, _, _ = await http.request(method, path, json=body)
        return status


def forbidden(message: str, details: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "Forbidden",
        "details": details,
        "code": 403,
    }


async def test_forbidden_bodies(kube: KubeServer, agent: str) -> None:
    cases = [
        (
            "GET",
            f"{NS}/pods",
            f'pods is forbidden: User "{USER}" cannot list resource "pods" in API group "" '
            'in the namespace "default"',
            {"kind": "pods"},
        ),
        (
            "GET",
            f"{NS}/pods/p1",
            f'pods "p1" is forbidden: User "{USER}" cannot get resource "pods" in API group "" '
            'in the namespace "default"',
            {"name": "p1", "kind": "pods"},
        ),
        (
            "GET",
            "/api/v1/nodes?watch=true",
            f'nodes is forbidden: User "{USER}" cannot watch resource "nodes" in API group "" '
            "at the cluster scope",
            {"kind": "nodes"},
        ),
        (
            "PUT",
            f"{NS}/pods/p1/status",
            f'pods "p1" is forbidden: User "{USER}" cannot update resource "pods/status" in API '
            'group "" in the namespace "default"',
            {"name": "p1", "kind": "pods"},
        ),
        (
            "POST",
            "/apis/apps/v1/namespaces/default/deployments",
            f'deployments.apps is forbidden: User "{USER}" cannot create resource "deployments" '
            'in API group "apps" in the namespace "default"',
            {"group": "apps", "kind": "deployments"},
        ),
        (
            "DELETE",
            "/api/v1/namespaces/kube-system",
            f'namespaces "kube-system" is forbidden: User "{USER}" cannot delete resource '
            '"namespaces" in API group "" in the namespace "kube-system"',
            {"name": "kube-system", "kind": "namespaces"},
        ),
        ("GET", "/metrics", f'forbidden: User "{USER}" cannot get path "/metrics"', {}),
    ]
    async with bearer(kube, agent) as http:
        for method, path, message, details in cases:
            status, body, _ = await http.request(method, path, json={} if method != "GET" else None)
            assert (status, body) == (403, forbidden(message, details)), path


async def test_authenticated_users_get_discovery_and_self_reviews(
    kube: KubeServer, agent: str
) -> None:
    for path in (
        "/version",
        "/healthz",
        "/api",
        "/apis",
        "/api/v1",
        "/apis/apps/v1",
        "/openapi/v3",
    ):
        assert await status_of(kube, agent, "GET", path) == 200, path
    review = {"spec": {"resourceAttributes": {"verb": "list", "resource": "pods"}}}
    path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    assert await status_of(kube, agent, "POST", path, review) == 201
    assert (
        await status_of(kube, agent, "POST", SAR, {"spec": {"user": "x", **review["spec"]}}) == 403
    )


async def test_resource_names(kube: KubeServer, agent: str) -> None:
    async with admin(kube) as http:
        rules = [
            {
                "apiGroups": [""],
                "resources": ["pods"],
                "verbs": ["get", "list"],
                "resourceNames": ["p1"],
            }
        ]
        await grant(http, "p1-reader", rules, sa_subject("agent"))
    assert await status_of(kube, agent, "GET", f"{NS}/pods/p1") == 200
    assert await status_of(kube, agent, "GET", f"{NS}/pods/p2") == 403
    assert await status_of(kube, agent, "GET", f"{NS}/pods") == 403  # a list names nothing


async def test_subresources_and_wildcards(kube: KubeServer, agent: str) -> None:
    async with admin(kube) as http:
        rules = [{"apiGroups": [""], "resources": ["pods/status"], "verbs": ["get"]}]
        await grant(http, "status-reader", rules, sa_subject("agent"))
    assert await status_of(kube, agent, "GET", f"{NS}/pods/p1/status") == 200
    assert await status_of(kube, agent, "GET", f"{NS}/pods/p1") == 403
    async with admin(kube) as http:
        rules = [{"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["*"]}]
        await grant(http, "any-status", rules, sa_subject("agent"), namespace=None)
        # and the main resource with every verb, but only in another namespace
        await ok(http, "POST", "/api/v1/namespaces", {"metadata": {"name": "other"}})
        rules = [{"apiGroups": [""], "resources": ["*"], "verbs": ["*"]}]
        await grant(http, "all", rules, sa_subject("agent"), namespace="other")
    assert await status_of(kube, agent, "GET", "/api/v1/nodes/n/status") == 404  # allowed
    assert await status_of(kube, agent, "GET", "/api/v1/nodes/n") == 403
    assert await status_of(kube, agent, "GET", "/api/v1/namespaces/other/pods") == 200
    assert await status_of(kube, agent, "GET", f"{NS}/configmaps") == 403


async def test_non_resource_urls(kube: KubeServer, agent: str) -> None:
    assert await status_of(kube, agent, "GET", "/logs/kubelet.log") == 403
    async with admin(kube) as http:
        rules = [{"nonResourceURLs": ["/logs/*", "/metrics"], "verbs": ["get"]}]
        await grant(http, "logs", rules, sa_subject("agent"), namespace=None)
    # allowed, then not served: the 404 comes after authorization
    assert await status_of(kube, agent, "GET", "/logs/kubelet.log") == 404
    assert await status_of(kube, agent, "GET", "/metrics") == 404
    assert await status_of(kube, agent, "GET", "/metricsx") == 403
    assert await status_of(kube, agent, "POST", "/metrics", {}) == 403


async def test_group_subjects_and_changes_take_effect_at_once(kube: KubeServer, agent: str) -> None:
    rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]
    assert await status_of(kube, agent, "GET", f"{NS}/pods") == 403
    group = {"kind": "Group", "name": "system:serviceaccounts:default"}
    async with admin(kube) as http:
        await grant(http, "ns-sas", rules, group)
    assert await status_of(kube, agent, "GET", f"{NS}/pods") == 200
    async with admin(kube) as http:
        await ok(http, "DELETE", f"{RBAC}/namespaces/default/rolebindings/ns-sas")
    assert await status_of(kube, agent, "GET", f"{NS}/pods") == 403
    async with admin(kube) as http:
        await grant(http, "everyone", rules, {"kind": "Group", "name": "system:authenticated"})
    assert await status_of(kube, agent, "GET", f"{NS}/pods") == 200
    async with admin(kube) as http:
        await ok(http, "DELETE", f"{RBAC}/namespaces/default/roles/everyone")
        status, body, _ = await http.get(f"{NS}/pods", headers={"Authorization": f"Bearer {agent}"})
    assert status == 403 and body["message"].endswith(
        ': RBAC: role.rbac.authorization.k8s.io "everyone" not found'
    )


async def test_masters_bypass_rbac(kube: KubeServer) -> None:
    async with admin(kube) as as_admin:
        await ok(as_admin, "DELETE", f"{RBAC}/clusterrolebindings/cluster-admin")
        await ok(as_admin, "DELETE", f"{RBAC}/clusterroles/cluster-admin")
        names = await ok(as_admin, "GET", f"{RBAC}/clusterroles")
    assert "system:discovery" in {item["metadata"]["name"] for item in names["items"]}


async def test_subject_access_reviews(kube: KubeServer, agent: str) -> None:
    spec = {
        "user": USER,
        "groups": ["system:serviceaccounts"],
        "resourceAttributes": {
            "namespace": "default",
            "verb": "get",
            "resource": "pods",
            "name": "p2",
        },
    }
    async with admin(kube) as http:
        out = await ok(http, "POST", SAR, {"spec": spec})
        assert out["kind"] == "SubjectAccessReview" and out["status"] == {"allowed": False}
        rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
        await grant(http, "reader", rules, sa_subject("agent"))
        out = await ok(http, "POST", SAR, {"spec": spec})
        assert out["status"] == {
            "allowed": True,
            "reason": 'RBAC: allowed by RoleBinding "reader/default" of Role "reader" to '
            'ServiceAccount "agent/default"',
        }
        local = "/apis/authorization.k8s.io/v1/namespaces/other/localsubjectaccessreviews"
        status, body, _ = await http.post(local, {"spec": spec})
        assert status == 422 and "spec.resourceAttributes.namespace" in body["message"]
        status, body, _ = await http.post(SAR, {"spec": {"resourceAttributes": {"verb": "get"}}})
        assert (
            status == 422 and "at least one of user or group must be specified" in body["message"]
        )


async def test_kubectl_auth_can_i_and_whoami(
    kube: KubeServer, kubectl: Kubectl, agent: str
) -> None:
    as_agent = ("--token", agent)
    rc, out, _ = await kubectl(*as_agent, "auth", "can-i", "list", "pods")
    assert (rc, out.strip()) == (1, "no")
    async with admin(kube) as http:
        rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]
        await grant(http, "lister", rules, sa_subject("agent"))
    rc, out, _ = await kubectl(*as_agent, "auth", "can-i", "list", "pods")
    assert (rc, out.strip()) == (0, "yes")
    rc, out, _ = await kubectl(*as_agent, "auth", "can-i", "list", "pods", "-n", "kube-system")
    assert (rc, out.strip()) == (1, "no")
    assert (await kubectl.ok("auth", "can-i", "delete", "nodes")).strip() == "yes"
    who = await kubectl.ok(*as_agent, "auth", "whoami")
    assert USER in who and "system:serviceaccounts:default" in who
    minted = (await kubectl.ok("create", "token", "agent", "--duration", "20m")).strip()
    rc, out, err = await kubectl("--token", minted, "get", "configmaps")
    assert rc == 1 and f'User "{USER}" cannot list resource "configmaps"' in err
