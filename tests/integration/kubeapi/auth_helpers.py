"""Helpers for tests of authentication and authorization against the emulator."""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from sim.kubeapi import KubeServer, ServerConfig
from sim.kubeapi.auth.identity import ADMIN_TOKEN

from .conftest import Http

ENFORCED = ServerConfig(bookmark_interval_s=0.2, enforce_auth=True)
RBAC = "/apis/rbac.authorization.k8s.io/v1"
NS = "/api/v1/namespaces/default"
UNAUTHORIZED = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "Unauthorized",
    "reason": "Unauthorized",
    "code": 401,
}


@contextlib.asynccontextmanager
async def bearer(kube: KubeServer, token: str | None) -> AsyncIterator[Http]:
    """Raw HTTPS that sends ``token`` on every request (None: no credentials)."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    connector = aiohttp.TCPConnector(ssl=kube.client_ssl())
    async with aiohttp.ClientSession(headers=headers, connector=connector) as session:
        yield Http(session, kube.url)


@contextlib.asynccontextmanager
async def admin(kube: KubeServer) -> AsyncIterator[Http]:
    async with bearer(kube, ADMIN_TOKEN) as http:
        yield http


async def ok(http: Http, method: str, path: str, body: Any = None) -> Any:
    status, out, _ = await http.request(method, path, json=body)
    assert status in (200, 201), (status, out)
    return out


async def service_account(http: Http, name: str, namespace: str = "default") -> dict[str, Any]:
    body = {"metadata": {"name": name}}
    created: dict[str, Any] = await ok(
        http, "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", body
    )
    return created


async def token(
    http: Http, sa: str, *, namespace: str = "default", spec: dict[str, Any] | None = None
) -> str:
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{sa}/token"
    out = await ok(http, "POST", path, {"spec": spec or {}})
    value: str = out["status"]["token"]
    return value


def claims(jwt: str) -> dict[str, Any]:
    payload = jwt.split(".")[1]
    decoded: dict[str, Any] = json.loads(
        base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    )
    return decoded


async def pod(
    http: Http, name: str, *, sa: str, node: str = "", namespace: str = "default"
) -> dict[str, Any]:
    spec: dict[str, Any] = {"serviceAccountName": sa, "containers": [{"name": "c", "image": "x"}]}
    if node:
        spec["nodeName"] = node
    created: dict[str, Any] = await ok(
        http,
        "POST",
        f"/api/v1/namespaces/{namespace}/pods",
        {"metadata": {"name": name}, "spec": spec},
    )
    return created


async def grant(
    http: Http,
    name: str,
    rules: list[dict[str, Any]],
    subject: dict[str, Any],
    *,
    namespace: str | None = "default",
) -> None:
    """A Role and RoleBinding in ``namespace`` (None: ClusterRole and ClusterRoleBinding)."""
    where = f"{RBAC}/namespaces/{namespace}" if namespace else RBAC
    role_kind = "Role" if namespace else "ClusterRole"
    plural = "roles" if namespace else "clusterroles"
    bindings = "rolebindings" if namespace else "clusterrolebindings"
    await ok(http, "POST", f"{where}/{plural}", {"metadata": {"name": name}, "rules": rules})
    binding = {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
        "subjects": [subject],
    }
    await ok(http, "POST", f"{where}/{bindings}", binding)


def sa_subject(name: str, namespace: str = "default") -> dict[str, Any]:
    return {"kind": "ServiceAccount", "name": name, "namespace": namespace}
