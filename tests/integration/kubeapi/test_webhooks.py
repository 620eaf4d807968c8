"""Admission webhooks over HTTPS with AdmissionReview v1."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from sim.kubeapi import KubeServer, ServerConfig, serve
from sim.kubeapi.admission.certificates import CertificateAuthority

from .conftest import Http

PODS = "/api/v1/namespaces/default/pods"
CMS = "/api/v1/namespaces/default/configmaps"
MUTATING = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
VALIDATING = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"


@dataclass
class Hook:
    """A webhook server that records every AdmissionReview it receives."""

    url: str
    ca_bundle: str
    port: int
    reviews: list[dict[str, Any]] = field(default_factory=list)


HOOK = web.AppKey("hook", Hook)


async def _handler(request: web.Request) -> web.Response:
    hook = request.app[HOOK]
    review = await request.json()
    hook.reviews.append(review)
    req = review["request"]
    response: dict[str, Any] = {"uid": req["uid"], "allowed": True}
    obj = req.get("object") or {}
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if request.path == "/slow":
        await asyncio.sleep(2)
    if request.path == "/mutate" and req["operation"] == "CREATE":
        ops = [{"op": "add", "path": "/metadata/labels", "value": {**labels, "mutated": "yes"}}]
        if obj.get("kind") == "Pod":
            ops.append(
                {
                    "op": "add",
                    "path": "/spec/schedulingGates",
                    "value": [{"name": "example.com/gang"}],
                }
            )
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
        response["warnings"] = ["mutated by test webhook"]
    if request.path == "/validate" and labels.get("deny") == "true":
        response = {
            "uid": req["uid"],
            "allowed": False,
            "status": {"code": 403, "reason": "Forbidden", "message": "deny label set"},
        }
    return web.json_response(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
    )


@pytest.fixture
async def hook() -> AsyncIterator[Hook]:
    ca = CertificateAuthority()
    pair = ca.issue(["hook.default.svc", "127.0.0.1"])
    result = Hook("", base64.b64encode(ca.cert_pem).decode(), 0)
    app = web.Application()
    app[HOOK] = result
    app.router.add_post("/{path:.*}", _handler)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=pair.server_context())
    await site.start()
    result.port = runner.addresses[0][1]
    result.url = f"https://127.0.0.1:{result.port}"
    yield result
    await runner.cleanup()


def _webhook(
    hook: Hook, path: str, *, name: str = "hook.example.com", **extra: Any
) -> dict[str, Any]:
    return {
        "name": name,
        "clientConfig": {"url": hook.url + path, "caBundle": hook.ca_bundle},
        "rules": [
            {
                "operations": ["CREATE", "UPDATE", "DELETE"],
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": ["pods", "configmaps"],
            }
        ],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        **extra,
    }


async def _configure(http: Http, collection: str, *hooks: dict[str, Any]) -> None:
    status, body, _ = await http.post(
        collection, {"metadata": {"name": "cfg"}, "webhooks": list(hooks)}
    )
    assert status == 201, body


def _pod(name: str, **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }


async def test_mutating_webhook_patches_object(http: Http, hook: Hook) -> None:
    await _configure(http, MUTATING, _webhook(hook, "/mutate"))
    status, pod, headers = await http.post(PODS, _pod("p", app="x"))
    assert status == 201, pod
    assert pod["metadata"]["labels"] == {"app": "x", "mutated": "yes"}
    assert pod["spec"]["schedulingGates"] == [{"name": "example.com/gang"}]
    assert pod["status"]["conditions"][0]["reason"] == "SchedulingGated"
    assert headers.getall("Warning") == ['299 - "mutated by test webhook"']
    review = hook.reviews[0]
    assert review["apiVersion"] == "admission.k8s.io/v1" and review["kind"] == "AdmissionReview"
    req = review["request"]
    assert req["operation"] == "CREATE"
    assert req["kind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert req["resource"] == {"group": "", "version": "v1", "resource": "pods"}
    assert req["namespace"] == "default" and req["name"] == "p"
    assert req["userInfo"]["username"] == "system:admin"
    assert req["object"]["metadata"]["name"] == "p" and req["oldObject"] is None


async def test_webhooks_see_quantities_as_the_server_decodes_them(http: Http, hook: Hook) -> None:
    """A client may send ``nvidia.com/gpu: 4``; the webhook gets ``"4"``, as from kube-apiserver."""
    await _configure(http, MUTATING, _webhook(hook, "/mutate"))
    pod = _pod("gpus")
    pod["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": 4, "cpu": 0.5},
        "requests": {"memory": 1024},
    }
    status, body, _ = await http.post(PODS, pod)
    assert status == 201, body
    resources = hook.reviews[0]["request"]["object"]["spec"]["containers"][0]["resources"]
    assert resources == {
        "limits": {"nvidia.com/gpu": "4", "cpu": "500m"},
        "requests": {"memory": "1024"},
    }


async def test_validating_webhook_denies(http: Http, hook: Hook) -> None:
    await _configure(http, VALIDATING, _webhook(hook, "/validate"))
    status, body, _ = await http.post(CMS, {"metadata": {"name": "c", "labels": {"deny": "true"}}})
    assert status == 403
    assert body["reason"] == "Forbidden"
    assert (
        body["message"] == 'admission webhook "hook.example.com" denied the request: deny label set'
    )
    status, _, _ = await http.get(f"{CMS}/c")
    assert status == 404
    status, _, _ = await http.post(CMS, {"metadata": {"name": "ok"}})
    assert status == 201
    status, _, _ = await http.patch(
        f"{CMS}/ok", {"metadata": {"labels": {"deny": "true"}}}, "application/merge-patch+json"
    )
    assert status == 403
    update = hook.reviews[-1]["request"]
    assert update["operation"] == "UPDATE" and update["oldObject"]["metadata"]["name"] == "ok"
    status, _, _ = await http.delete(f"{CMS}/ok")
    assert status == 200 and hook.reviews[-1]["request"]["operation"] == "DELETE"


async def test_selectors_and_match_conditions(http: Http, hook: Hook) -> None:
    await http.post(
        "/api/v1/namespaces", {"metadata": {"name": "quiet", "labels": {"hooks": "off"}}}
    )
    await _configure(
        http,
        VALIDATING,
        _webhook(
            hook,
            "/validate",
            namespaceSelector={
                "matchExpressions": [{"key": "hooks", "operator": "NotIn", "values": ["off"]}]
            },
            objectSelector={"matchLabels": {"deny": "true"}},
            matchConditions=[
                {"name": "not-exempt", "expression": "object.metadata.name != 'exempt'"}
            ],
        ),
    )
    status, _, _ = await http.post(
        "/api/v1/namespaces/quiet/configmaps",
        {"metadata": {"name": "c", "labels": {"deny": "true"}}},
    )
    assert status == 201  # namespace excluded
    status, _, _ = await http.post(
        CMS, {"metadata": {"name": "exempt", "labels": {"deny": "true"}}}
    )
    assert status == 201  # match condition false
    status, _, _ = await http.post(
        CMS, {"metadata": {"name": "caught", "labels": {"deny": "true"}}}
    )
    assert status == 403
    assert [r["request"]["name"] for r in hook.reviews] == ["caught"]


async def test_a_false_match_condition_skips_the_webhook_whatever_errors_others_had(
    http: Http, hook: Hook
) -> None:
    # As kube-apiserver's matcher: errors count only when no condition is false.
    await _configure(
        http,
        VALIDATING,
        _webhook(
            hook,
            "/validate",
            matchConditions=[
                {"name": "needs-data", "expression": "object.data.x == 'deny'"},
                {"name": "not-exempt", "expression": "object.metadata.name != 'exempt'"},
            ],
        ),
    )
    status, _, _ = await http.post(CMS, {"metadata": {"name": "exempt"}})
    assert status == 201  # the first fails to evaluate (no data), the second is false
    status, body, _ = await http.post(CMS, {"metadata": {"name": "other"}})
    assert status == 500, body  # an error and nothing false: Fail rejects
    assert 'failed to evaluate match condition "needs-data"' in body["message"]
    denied = {"metadata": {"name": "x", "labels": {"deny": "true"}}, "data": {"x": "deny"}}
    status, _, _ = await http.post(CMS, denied)
    assert status == 403
    assert [r["request"]["name"] for r in hook.reviews] == ["x"]


async def test_failure_policy(http: Http, hook: Hook) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead_port = s.getsockname()[1]
    dead = {"url": f"https://127.0.0.1:{dead_port}/validate", "caBundle": hook.ca_bundle}
    await _configure(
        http,
        VALIDATING,
        {**_webhook(hook, "/validate", name="dead.example.com"), "clientConfig": dead},
    )
    status, body, _ = await http.post(CMS, {"metadata": {"name": "c"}})
    assert status == 500 and body["reason"] == "InternalError"
    assert body["message"].startswith(
        'Internal error occurred: failed calling webhook "dead.example.com": failed to call '
        "webhook: "
        f'Post "https://127.0.0.1:{dead_port}/validate"'
    )
    await http.delete(f"{VALIDATING}/cfg")
    await _configure(
        http,
        VALIDATING,
        {
            **_webhook(hook, "/validate", name="dead.example.com", failurePolicy="Ignore"),
            "clientConfig": dead,
        },
    )
    status, _, _ = await http.post(CMS, {"metadata": {"name": "c"}})
    assert status == 201


async def test_untrusted_certificate_fails(http: Http, hook: Hook) -> None:
    other_ca = base64.b64encode(CertificateAuthority("other").cert_pem).decode()
    await _configure(
        http,
        VALIDATING,
        {
            **_webhook(hook, "/validate"),
            "clientConfig": {"url": hook.url + "/validate", "caBundle": other_ca},
        },
    )
    status, body, _ = await http.post(CMS, {"metadata": {"name": "c"}})
    assert status == 500 and "failed calling webhook" in body["message"]
    assert hook.reviews == []


async def test_timeout_seconds(http: Http, hook: Hook) -> None:
    await _configure(http, VALIDATING, _webhook(hook, "/slow", timeoutSeconds=1))
    status, body, _ = await http.post(CMS, {"metadata": {"name": "c"}})
    assert status == 500 and "context deadline exceeded" in body["message"]


async def test_service_reference(hook: Hook, tmp_path: Path) -> None:
    config = ServerConfig(webhook_service_hosts={"default/hook": f"127.0.0.1:{hook.port}"})
    async with serve(config=config, kubeconfig=tmp_path / "kc") as kube:
        import aiohttp

        async with aiohttp.ClientSession() as session:
            http = Http(session, kube.url)
            webhook = _webhook(hook, "/mutate")
            webhook["clientConfig"] = {
                "service": {"namespace": "default", "name": "hook", "path": "/mutate", "port": 443},
                "caBundle": hook.ca_bundle,
            }
            await _configure(http, MUTATING, webhook)
            status, cm, _ = await http.post(CMS, {"metadata": {"name": "c"}})
            assert status == 201 and cm["metadata"]["labels"] == {"mutated": "yes"}


async def test_webhook_configuration_itself_is_not_intercepted(
    http: Http, hook: Hook, kube: KubeServer
) -> None:
    await _configure(http, VALIDATING, _webhook(hook, "/validate"))
    status, _, _ = await http.delete(f"{VALIDATING}/cfg")
    assert status == 200
    assert hook.reviews == []
