"""Authentication with enforcement on: the admin token, ServiceAccount tokens from the
TokenRequest API (plain and bound to a Pod on a Node), and the 401 for every credential
that does not (or no longer) stand for anyone."""

from __future__ import annotations

from typing import Any

import pytest

from sim.kubeapi import KubeServer, ServerConfig, serve
from sim.kubeapi.auth.identity import ADMIN_TOKEN

from .auth_helpers import (
    ENFORCED,
    NS,
    UNAUTHORIZED,
    admin,
    bearer,
    claims,
    ok,
    pod,
    service_account,
    token,
)
from .conftest import Http

ISSUER = "https://kubernetes.default.svc.cluster.local"
WHOAMI = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"


@pytest.fixture
def kube_config() -> ServerConfig:
    return ENFORCED


async def whoami(kube: KubeServer, jwt: str) -> tuple[int, Any]:
    async with bearer(kube, jwt) as http:
        status, body, _ = await http.post(WHOAMI, {})
        return status, body


async def review(kube: KubeServer, jwt: str, audiences: list[str] | None = None) -> Any:
    async with admin(kube) as http:
        spec: dict[str, Any] = {"token": jwt}
        if audiences is not None:
            spec["audiences"] = audiences
        return (await ok(http, "POST", TOKEN_REVIEWS, {"spec": spec}))["status"]


async def test_no_or_unknown_credentials_are_401(kube: KubeServer) -> None:
    assert kube.url.startswith("https://")
    async with bearer(kube, None) as http:
        await no_credentials(http)


async def no_credentials(http: Http) -> None:
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic YTpi"}):
        status, body, _ = await http.get(f"{NS}/pods", headers=headers)
        assert (status, body) == (401, UNAUTHORIZED)
    status, _, _ = await http.get("/version", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert status == 200


async def test_admin_token_is_kubernetes_admin(kube: KubeServer) -> None:
    status, body = await whoami(kube, ADMIN_TOKEN)
    assert status == 201
    assert body["status"]["userInfo"] == {
        "username": "kubernetes-admin",
        "groups": ["system:masters", "system:authenticated"],
    }


async def test_token_request_and_use(kube: KubeServer) -> None:
    async with admin(kube) as http:
        sa = await service_account(http, "agent")
        out = await ok(http, "POST", f"{NS}/serviceaccounts/agent/token", {"spec": {}})
    assert out["kind"] == "TokenRequest" and out["apiVersion"] == "authentication.k8s.io/v1"
    assert out["spec"] == {"audiences": [ISSUER], "expirationSeconds": 3600}
    assert out["status"]["expirationTimestamp"].endswith("Z")
    jwt = out["status"]["token"]
    payload = claims(jwt)
    assert payload["sub"] == "system:serviceaccount:default:agent"
    assert payload["iss"] == ISSUER and payload["aud"] == [ISSUER]
    assert payload["exp"] - payload["iat"] == 3600
    assert payload["kubernetes.io"]["serviceaccount"] == {
        "name": "agent",
        "uid": sa["metadata"]["uid"],
    }
    status, body = await whoami(kube, jwt)
    assert status == 201
    assert body["status"]["userInfo"] == {
        "username": "system:serviceaccount:default:agent",
        "uid": sa["metadata"]["uid"],
        "groups": [
            "system:serviceaccounts",
            "system:serviceaccounts:default",
            "system:authenticated",
        ],
        "extra": {"authentication.kubernetes.io/credential-id": [f"JTI={payload['jti']}"]},
    }


async def test_pod_bound_token_names_pod_and_node(kube: KubeServer) -> None:
    async with admin(kube) as http:
        await service_account(http, "imex")
        node = await ok(http, "POST", "/api/v1/nodes", {"metadata": {"name": "tray-0"}})
        bound = await pod(http, "imex-abc", sa="imex", node="tray-0")
        jwt = await token(
            http,
            "imex",
            spec={
                "audiences": [ISSUER, "nats"],
                "expirationSeconds": 600,
                "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "imex-abc"},
            },
        )
    pod_uid, node_uid = bound["metadata"]["uid"], node["metadata"]["uid"]
    private = claims(jwt)["kubernetes.io"]
    assert private["pod"] == {"name": "imex-abc", "uid": pod_uid}
    assert private["node"] == {"name": "tray-0", "uid": node_uid}
    status = await review(kube, jwt, ["nats"])
    assert status["authenticated"] is True and status["audiences"] == ["nats"]
    extra = status["user"]["extra"]
    assert extra["authentication.kubernetes.io/pod-name"] == ["imex-abc"]
    assert extra["authentication.kubernetes.io/pod-uid"] == [pod_uid]
    assert extra["authentication.kubernetes.io/node-name"] == ["tray-0"]
    assert extra["authentication.kubernetes.io/node-uid"] == [node_uid]
    assert (await review(kube, jwt, ["elsewhere"])).get("authenticated") is None


async def test_malformed_tokens_are_401(kube: KubeServer) -> None:
    async with admin(kube) as http:
        await service_account(http, "agent")
        good = await token(http, "agent")
    header, payload, signature = good.split(".")
    forged = f"{header}.{payload[:-4]}AAAA.{signature}"
    for bad in ("abc", "a.b.c", forged, good[:-2], f"{header}.{payload}."):
        assert await whoami(kube, bad) == (401, UNAUTHORIZED), bad
        assert (await review(kube, bad))["error"] == "invalid bearer token"


async def test_token_of_deleted_service_account_is_401(kube: KubeServer) -> None:
    async with admin(kube) as http:
        await service_account(http, "agent")
        jwt = await token(http, "agent")
        assert (await whoami(kube, jwt))[0] == 201
        await ok(http, "DELETE", f"{NS}/serviceaccounts/agent")
        assert await whoami(kube, jwt) == (401, UNAUTHORIZED)
        await service_account(http, "agent")  # same name, new uid: still not that account
    assert await whoami(kube, jwt) == (401, UNAUTHORIZED)


async def test_token_bound_to_deleted_or_replaced_pod_is_401(kube: KubeServer) -> None:
    async with admin(kube) as http:
        await service_account(http, "agent")
        await pod(http, "worker", sa="agent")
        bound = {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "worker"}}
        jwt = await token(http, "agent", spec=bound)
        assert (await whoami(kube, jwt))[0] == 201
        await ok(http, "DELETE", f"{NS}/pods/worker")
        assert await whoami(kube, jwt) == (401, UNAUTHORIZED)
        await pod(http, "worker", sa="agent")
    assert await whoami(kube, jwt) == (401, UNAUTHORIZED)


async def test_expired_token_is_401(kube: KubeServer) -> None:
    async with admin(kube) as http:
        await service_account(http, "agent")
        jwt = await token(http, "agent", spec={"expirationSeconds": 600})
    tokens = kube.api.access.tokens
    issued = claims(jwt)["exp"]
    tokens.clock = lambda: issued + 59.0  # within go-jose's one-minute leeway
    assert (await whoami(kube, jwt))[0] == 201
    tokens.clock = lambda: issued + 61.0
    assert await whoami(kube, jwt) == (401, UNAUTHORIZED)
    assert "expired" in (await review(kube, jwt))["error"]


async def test_token_request_errors(kube: KubeServer) -> None:
    async with admin(kube) as http:
        await service_account(http, "agent")
        await service_account(http, "other")
        await pod(http, "p", sa="other")
        path = f"{NS}/serviceaccounts/agent/token"
        status, body, _ = await http.post(path, {"spec": {"expirationSeconds": 60}})
        assert status == 422 and body["message"] == (
            'TokenRequest.authentication.k8s.io "agent" is invalid: spec.expirationSeconds: '
            "Invalid value: 60: may not specify a duration less than 10 minutes"
        )
        ref = {"kind": "Pod", "apiVersion": "v1", "name": "p"}
        status, body, _ = await http.post(path, {"spec": {"boundObjectRef": ref}})
        assert (status, body["message"]) == (
            400,
            'cannot bind token for serviceaccount "agent" to pod running with different '
            "serviceaccount name.",
        )
        ref = {"kind": "Deployment", "apiVersion": "apps/v1", "name": "d"}
        status, body, _ = await http.post(path, {"spec": {"boundObjectRef": ref}})
        assert (status, body["message"]) == (
            400,
            'cannot bind token for serviceaccount "agent" to object of type apps/v1, '
            "Kind=Deployment",
        )
        ref = {"kind": "Pod", "apiVersion": "v1", "name": "missing"}
        status, body, _ = await http.post(path, {"spec": {"boundObjectRef": ref}})
        assert (status, body["message"]) == (404, 'pods "missing" not found')
        status, body, _ = await http.post(f"{NS}/serviceaccounts/ghost/token", {})
        assert (status, body["message"]) == (404, 'serviceaccounts "ghost" not found')


async def test_anonymous_requests_when_allowed(tmp_path: Any) -> None:
    config = ServerConfig(enforce_auth=True, anonymous_auth=True)
    async with serve(config=config, kubeconfig=tmp_path / "kc") as kube, bearer(kube, None) as http:
        status, _, _ = await http.get("/healthz")
        assert status == 200
        status, body, _ = await http.get(f"{NS}/pods")
        assert (status, body["message"]) == (
            403,
            'pods is forbidden: User "system:anonymous" cannot list resource "pods" in API '
            'group "" in the namespace "default"',
        )


async def test_not_enforced_by_default(tmp_path: Any) -> None:
    async with serve(kubeconfig=tmp_path / "kc") as kube, bearer(kube, "whatever") as http:
        status, body, _ = await http.post(WHOAMI, {})
    assert status == 201 and body["status"]["userInfo"]["username"] == "system:admin"
