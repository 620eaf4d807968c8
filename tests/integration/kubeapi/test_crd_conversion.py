"""CRD conversion through a webhook (``ConversionReview`` v1), as kube-apiserver does it.

A CRD ``gizmos.example.com`` serves ``v1`` (``spec.count``) and ``v2`` (``spec.amount``, the
storage version); a webhook server here converts between them by renaming the field, and can
be told to answer wrongly or be stopped. Every request goes over real HTTP, and kubectl reads
both versions.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from sim.kubeapi import KubeServer, ServerConfig, serve
from sim.kubeapi.admission.certificates import CertificateAuthority

from .conftest import Http, Kubectl

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
V1 = "/apis/example.com/v1/namespaces/default/gizmos"
V2 = "/apis/example.com/v2/namespaces/default/gizmos"
SERVICE = "gizmo-converter"


@dataclass
class Converter:
    """A conversion webhook: renames ``spec.count`` (v1) to ``spec.amount`` (v2) and back.

    ``mode`` makes it answer wrongly: ``fail`` (result Failure), ``uid``, ``two`` (two objects),
    ``version`` (the source version back), ``rename`` (another name), ``relabel`` (adds a label,
    which is allowed), ``bad-label`` (an invalid label), ``status`` (HTTP 500).
    """

    ca_bundle: str
    address: str = ""
    mode: str = "ok"
    reviews: list[dict[str, Any]] = field(default_factory=list)


CONVERTER = web.AppKey("converter", Converter)


def _convert(obj: dict[str, Any], desired: str, mode: str) -> dict[str, Any]:
    out = {**obj, "apiVersion": desired, "metadata": dict(obj.get("metadata") or {})}
    spec = dict(obj.get("spec") or {})
    if desired.endswith("/v2") and "count" in spec:
        spec["amount"] = spec.pop("count")
    if desired.endswith("/v1") and "amount" in spec:
        spec["count"] = spec.pop("amount")
    out["spec"] = spec
    if mode == "version":
        out["apiVersion"] = obj["apiVersion"]
    if mode == "rename":
        out["metadata"]["name"] = "other"
    if mode == "relabel":
        out["metadata"]["labels"] = {**(obj["metadata"].get("labels") or {}), "converted": "yes"}
    if mode == "bad-label":
        out["metadata"]["labels"] = {"bad key!": "x"}
    return out


async def _handle(request: web.Request) -> web.Response:
    converter = request.app[CONVERTER]
    review = await request.json()
    converter.reviews.append(review)
    req = review["request"]
    mode = converter.mode
    if mode == "status":
        return web.Response(status=500, text="broken")
    objects = [_convert(o, req["desiredAPIVersion"], mode) for o in req["objects"]]
    response: dict[str, Any] = {
        "uid": "not-the-uid" if mode == "uid" else req["uid"],
        "convertedObjects": objects * 2 if mode == "two" else objects,
        "result": {"status": "Success"},
    }
    if mode == "fail":
        response["convertedObjects"] = []
        response["result"] = {
            "status": "Failure",
            "message": 'spec.count: Invalid value: "x": cannot convert',
        }
    return web.json_response(
        {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": response}
    )


@pytest.fixture
async def converter() -> AsyncIterator[Converter]:
    ca = CertificateAuthority()
    pair = ca.issue([f"{SERVICE}.default.svc", "127.0.0.1"])
    result = Converter(base64.b64encode(ca.cert_pem).decode())
    app = web.Application()
    app[CONVERTER] = result
    app.router.add_post("/convert", _handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=pair.server_context())
    await site.start()
    result.address = f"127.0.0.1:{runner.addresses[0][1]}"
    yield result
    await runner.cleanup()


@pytest.fixture
async def kube(converter: Converter, tmp_path: Path) -> AsyncIterator[KubeServer]:
    """The emulator, reaching the converter's Service at its address."""
    config = ServerConfig(
        bookmark_interval_s=0.2, webhook_service_hosts={f"default/{SERVICE}": converter.address}
    )
    async with serve(config=config, kubeconfig=tmp_path / "kubeconfig") as server:
        yield server


def _schema(field_name: str) -> dict[str, Any]:
    return {
        "openAPIV3Schema": {
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "properties": {
                        field_name: {"type": "integer", "minimum": 0},
                        "color": {"type": "string", "default": "red"},
                    },
                },
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        }
    }


def gizmo_crd(ca_bundle: str, *, storage: str = "v2", strategy: str = "Webhook") -> dict[str, Any]:
    conversion: dict[str, Any] = {"strategy": strategy}
    if strategy == "Webhook":
        conversion["webhook"] = {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {
                "service": {"namespace": "default", "name": SERVICE, "path": "/convert"},
                "caBundle": ca_bundle,
            },
        }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gizmos.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
            "conversion": conversion,
            "versions": [
                {
                    "name": name,
                    "served": True,
                    "storage": name == storage,
                    "subresources": {"status": {}},
                    "schema": _schema(field_name),
                    "additionalPrinterColumns": [
                        {"name": "Value", "type": "integer", "jsonPath": f".spec.{field_name}"}
                    ],
                }
                for name, field_name in (("v1", "count"), ("v2", "amount"))
            ],
        },
    }


async def _install(http: Http, crd: dict[str, Any]) -> None:
    status, body, _ = await http.get(f"{CRDS}/{crd['metadata']['name']}")
    if status == 200:
        crd = {
            **crd,
            "metadata": {**crd["metadata"], "resourceVersion": body["metadata"]["resourceVersion"]},
        }
        status, body, _ = await http.put(f"{CRDS}/{crd['metadata']['name']}", crd)
        assert status == 200, body
        return
    status, body, _ = await http.post(CRDS, crd)
    assert status == 201, body


@pytest.fixture
async def gizmos(http: Http, converter: Converter) -> Converter:
    await _install(http, gizmo_crd(converter.ca_bundle))
    return converter


def _v1(name: str, count: int, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Gizmo",
        "metadata": {"name": name, "labels": labels},
        "spec": {"count": count},
    }


def _stored(kube: KubeServer, name: str) -> dict[str, Any]:
    entry = kube.store.bucket("example.com/gizmos").get("default", name)
    assert entry is not None
    return entry.obj()


# -- the CRD ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("conversion", "message"),
    [
        (
            {"strategy": "Webhook"},
            "spec.conversion.webhookClientConfig: Required value: required when strategy is "
            "set to Webhook",
        ),
        (
            {
                "strategy": "Webhook",
                "webhook": {"clientConfig": {"url": "https://h/convert"}},
            },
            "spec.conversion.conversionReviewVersions: Required value",
        ),
        (
            {
                "strategy": "Webhook",
                "webhook": {
                    "conversionReviewVersions": ["v9"],
                    "clientConfig": {"url": "http://h/convert"},
                },
            },
            "'https' is the only allowed URL scheme",
        ),
        (
            {
                "strategy": "Webhook",
                "webhook": {
                    "conversionReviewVersions": ["v9"],
                    "clientConfig": {"url": "https://h"},
                },
            },
            "must include at least one of v1, v1beta1",
        ),
        (
            {
                "strategy": "None",
                "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": {"url": "https://h"},
                },
            },
            "spec.conversion.webhookClientConfig: Forbidden: should not be set when strategy is "
            "not set to Webhook",
        ),
        (
            {"strategy": "Magic"},
            'spec.conversion.strategy: Unsupported value: "Magic": supported values: "None", '
            '"Webhook"',
        ),
    ],
)
async def test_crd_conversion_is_validated(
    http: Http, converter: Converter, conversion: dict[str, Any], message: str
) -> None:
    crd = gizmo_crd(converter.ca_bundle)
    crd["spec"]["conversion"] = conversion
    status, body, _ = await http.post(CRDS, crd)
    assert status == 422, body
    assert message in body["message"]


async def test_a_service_port_defaults_to_443(http: Http, converter: Converter) -> None:
    status, body, _ = await http.post(CRDS, gizmo_crd(converter.ca_bundle))
    assert status == 201, body
    service = body["spec"]["conversion"]["webhook"]["clientConfig"]["service"]
    assert service["port"] == 443


# -- reads and writes ------------------------------------------------------------------------


async def test_written_in_one_version_read_in_both_stored_in_the_storage_version(
    http: Http, kube: KubeServer, gizmos: Converter
) -> None:
    status, created, _ = await http.post(V1, _v1("g1", 3))
    assert status == 201, created
    # The answer is the stored object decoded into v1 again, with v1's defaults.
    assert created["apiVersion"] == "example.com/v1"
    assert created["spec"] == {"count": 3, "color": "red"}
    stored = _stored(kube, "g1")
    assert stored["apiVersion"] == "example.com/v2"
    assert stored["spec"] == {"amount": 3, "color": "red"}

    status, as_v2, _ = await http.get(f"{V2}/g1")
    assert status == 200 and as_v2["spec"] == {"amount": 3, "color": "red"}
    status, as_v1, _ = await http.get(f"{V1}/g1")
    assert status == 200 and as_v1["spec"] == {"count": 3, "color": "red"}
    assert as_v1["metadata"] == as_v2["metadata"]
    # v1 -> v2 to store, v2 -> v1 for the answer, v2 -> v1 for the GET; the v2 GET sent nothing.
    sent = [r["request"]["desiredAPIVersion"] for r in gizmos.reviews]
    assert sent == ["example.com/v2", "example.com/v1", "example.com/v1"]
    review = gizmos.reviews[0]
    assert review["apiVersion"] == "apiextensions.k8s.io/v1"
    assert review["kind"] == "ConversionReview"
    assert review["request"]["objects"][0]["spec"] == {"count": 3, "color": "red"}


async def test_updates_and_patches_in_the_older_version_round_trip(
    http: Http, kube: KubeServer, gizmos: Converter
) -> None:
    status, created, _ = await http.post(
        V2, {**_v1("g1", 1), "apiVersion": "example.com/v2", "spec": {"amount": 1}}
    )
    assert status == 201, created
    status, patched, _ = await http.patch(
        f"{V1}/g1", {"spec": {"count": 5}}, "application/merge-patch+json"
    )
    assert status == 200, patched
    assert patched["spec"]["count"] == 5
    assert _stored(kube, "g1")["spec"]["amount"] == 5
    patched["metadata"]["labels"] = {"tier": "gold"}
    status, updated, _ = await http.put(f"{V1}/g1", patched)
    assert status == 200, updated
    status, as_v2, _ = await http.get(f"{V2}/g1")
    assert as_v2["metadata"]["labels"] == {"tier": "gold"}
    assert as_v2["spec"]["amount"] == 5
    # An update that changes nothing writes nothing.
    rv = as_v2["metadata"]["resourceVersion"]
    status, again, _ = await http.put(f"{V1}/g1", updated)
    assert status == 200 and again["metadata"]["resourceVersion"] == rv
    status, body, _ = await http.patch(
        f"{V1}/g1/status", {"status": {"phase": "Up"}}, "application/merge-patch+json"
    )
    assert status == 200, body
    assert _stored(kube, "g1")["status"] == {"phase": "Up"}


async def test_lists_at_either_version(
    http: Http, kube: KubeServer, gizmos: Converter, kubectl: Kubectl
) -> None:
    for name, count in (("a", 1), ("b", 2)):
        status, body, _ = await http.post(V1, _v1(name, count))
        assert status == 201, body
    status, as_v1, _ = await http.get(V1)
    assert status == 200, as_v1
    assert as_v1["apiVersion"] == "example.com/v1"
    assert [(i["apiVersion"], i["spec"]["count"]) for i in as_v1["items"]] == [
        ("example.com/v1", 1),
        ("example.com/v1", 2),
    ]
    calls = len(gizmos.reviews)
    status, as_v2, _ = await http.get(V2)
    assert [i["spec"]["amount"] for i in as_v2["items"]] == [1, 2]
    assert len(gizmos.reviews) == calls  # already stored as v2: nothing to convert

    out = await kubectl.ok("get", "gizmos.v1.example.com")
    assert out.split("\n")[1].split()[:2] == ["a", "1"]
    out = await kubectl.ok("get", "gizmos.v2.example.com", "b", "-o", "jsonpath={.spec.amount}")
    assert out == "2"
    out = await kubectl.ok("get", "gizmos.v1.example.com", "b", "-o", "jsonpath={.spec.count}")
    assert out == "2"


async def test_watches_at_either_version(http: Http, gizmos: Converter) -> None:
    status, body, _ = await http.post(V1, _v1("w", 1))
    assert status == 201, body
    params = {"watch": "true", "resourceVersion": "0"}
    async with (
        http.watch_stream(V1, params=params) as old,
        http.watch_stream(V1, params=params) as old_too,
        http.watch_stream(V2, params=params) as new,
    ):
        for stream, spec in ((old, {"count": 1}), (old_too, {"count": 1}), (new, {"amount": 1})):
            event = await stream.next()
            assert event["type"] == "ADDED"
            assert {k: event["object"]["spec"][k] for k in spec} == spec
        calls = len(gizmos.reviews)
        status, body, _ = await http.patch(
            f"{V2}/w", {"spec": {"amount": 7}}, "application/merge-patch+json"
        )
        assert status == 200, body
        for stream, key in ((old, "count"), (old_too, "count"), (new, "amount")):
            event = await stream.next()
            assert event["type"] == "MODIFIED"
            assert event["object"]["spec"][key] == 7
        # One conversion for the event, shared by both v1 watchers.
        assert len(gizmos.reviews) == calls + 1


# -- a webhook that is down or answers wrongly -----------------------------------------------


async def test_a_webhook_that_is_down_fails_reads_and_writes_in_the_other_version(
    http: Http, gizmos: Converter, kubectl: Kubectl
) -> None:
    status, body, _ = await http.post(V1, _v1("g1", 3))
    assert status == 201, body
    await _install(http, _with_url(gizmo_crd(gizmos.ca_bundle), "https://127.0.0.1:1/convert"))
    url = "https://127.0.0.1:1/convert?timeout=30s"

    status, body, _ = await http.get(f"{V1}/g1")
    assert status == 500, body
    assert "reason" not in body
    assert body["message"] == (
        f'conversion webhook for example.com/v2, Kind=Gizmo failed: Post "{url}": '
        "dial tcp 127.0.0.1:1: connect: connection refused"
    )
    status, body, _ = await http.get(V1)
    assert status == 500 and body["message"].startswith("conversion webhook for example.com/v2")

    status, body, _ = await http.post(V1, _v1("g2", 1))
    assert status == 500, body
    assert body["reason"] == "InternalError"
    assert body["message"].startswith(
        "Internal error occurred: conversion webhook for example.com/v1, Kind=Gizmo failed: "
        f'Post "{url}": '
    )
    # The storage version needs no webhook.
    status, body, _ = await http.get(f"{V2}/g1")
    assert status == 200 and body["spec"]["amount"] == 3

    rc, _, err = await kubectl("get", "gizmos.v1.example.com", "g1")
    assert rc == 1
    assert err.startswith("Error from server: conversion webhook for example.com/v2, Kind=Gizmo")

    events = await http.watch_lines(V1, params={"watch": "true"}, count=2)
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    assert events[0]["object"]["code"] == 500
    assert events[0]["object"]["message"].startswith(
        "Internal error occurred: conversion webhook for example.com/v2, Kind=Gizmo failed"
    )


async def test_a_service_that_does_not_exist_is_named(http: Http, converter: Converter) -> None:
    crd = gizmo_crd(converter.ca_bundle)
    crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["name"] = "nowhere"
    await _install(http, crd)
    status, body, _ = await http.post(V1, _v1("g1", 1))
    assert status == 500, body
    assert body["message"] == (
        "Internal error occurred: conversion webhook for example.com/v1, Kind=Gizmo failed: "
        'Post "https://nowhere.default.svc:443/convert?timeout=30s": service "nowhere" not found'
    )


def _with_url(crd: dict[str, Any], url: str) -> dict[str, Any]:
    client = crd["spec"]["conversion"]["webhook"]["clientConfig"]
    client.pop("service")
    client["url"] = url
    return crd


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("fail", 'failed: spec.count: Invalid value: "x": cannot convert'),
        ("uid", 'failed: expected response.uid="'),
        ("two", "returned 2 objects, expected 1"),
        (
            "version",
            "returned invalid object at index 0: invalid groupVersion (expected example.com/v1, "
            "received example.com/v2)",
        ),
        ("rename", "returned invalid object: must have the same name: g1 != other"),
        ("bad-label", 'returned invalid metadata: metadata.labels: Invalid value: "bad key!"'),
        ("status", 'failed: Post "'),
    ],
)
async def test_wrong_answers_are_refused_as_kube_apiserver_refuses_them(
    http: Http, gizmos: Converter, mode: str, message: str
) -> None:
    status, body, _ = await http.post(
        V2,
        {
            "apiVersion": "example.com/v2",
            "kind": "Gizmo",
            "metadata": {"name": "g1"},
            "spec": {"amount": 2},
        },
    )
    assert status == 201, body
    gizmos.mode = mode
    status, body, _ = await http.get(f"{V1}/g1")
    assert status == 500, body
    assert body["message"].startswith("conversion webhook for example.com/v2, Kind=Gizmo ")
    assert message in body["message"]


async def test_labels_and_annotations_may_change_the_rest_of_metadata_is_kept(
    http: Http, gizmos: Converter
) -> None:
    status, body, _ = await http.post(V1, _v1("g1", 2, team="a"))
    assert status == 201, body
    gizmos.mode = "relabel"
    status, body, _ = await http.get(f"{V1}/g1")
    assert status == 200, body
    assert body["metadata"]["labels"] == {"team": "a", "converted": "yes"}
    assert body["metadata"]["name"] == "g1"


# -- objects kept in an older stored version -------------------------------------------------


async def test_objects_stored_in_an_older_version_are_converted_then_rewritten(
    http: Http, kube: KubeServer, converter: Converter
) -> None:
    await _install(http, gizmo_crd(converter.ca_bundle, storage="v1"))
    status, body, _ = await http.post(V1, _v1("old", 4))
    assert status == 201, body
    assert _stored(kube, "old")["apiVersion"] == "example.com/v1"
    await _install(http, gizmo_crd(converter.ca_bundle, storage="v2"))
    status, crd, _ = await http.get(f"{CRDS}/gizmos.example.com")
    assert crd["status"]["storedVersions"] == ["v1", "v2"]

    status, listed, _ = await http.get(V2)
    assert [(i["apiVersion"], i["spec"]["amount"]) for i in listed["items"]] == [
        ("example.com/v2", 4)
    ]
    # A write that changes nothing still stores the object in the current version (a storage
    # migration rewrites every object so).
    status, body, _ = await http.patch(f"{V2}/old", {}, "application/merge-patch+json")
    assert status == 200, body
    assert _stored(kube, "old")["apiVersion"] == "example.com/v2"
    assert _stored(kube, "old")["spec"] == {"amount": 4, "color": "red"}


async def test_strategy_none_only_changes_the_api_version(http: Http, converter: Converter) -> None:
    await _install(http, gizmo_crd(converter.ca_bundle, strategy="None"))
    status, body, _ = await http.post(V1, _v1("n", 1))
    assert status == 201, body
    status, body, _ = await http.get(f"{V2}/n")
    assert status == 200 and body["apiVersion"] == "example.com/v2"
    assert converter.reviews == []


# -- admission of an equivalent version ------------------------------------------------------


async def test_a_policy_on_the_other_version_sees_the_object_converted(
    http: Http, gizmos: Converter
) -> None:
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "small-amounts"},
        "spec": {
            "matchConstraints": {
                "resourceRules": [
                    {
                        "operations": ["CREATE", "UPDATE"],
                        "apiGroups": ["example.com"],
                        "apiVersions": ["v2"],
                        "resources": ["gizmos"],
                    }
                ]
            },
            "validations": [{"expression": "object.spec.amount <= 10", "message": "too many"}],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "small-amounts"},
        "spec": {"policyName": "small-amounts", "validationActions": ["Deny"]},
    }
    vap = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
    vapb = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"
    assert (await http.post(vap, policy))[0] == 201
    assert (await http.post(vapb, binding))[0] == 201
    status, body, _ = await http.post(V1, _v1("small", 3))
    assert status == 201, body
    status, body, _ = await http.post(V1, _v1("big", 30))
    assert status == 422, body
    assert "denied request: too many" in body["message"]
