"""Label and field selectors over HTTP, and the Status bodies of bad requests."""

from __future__ import annotations

import pytest

from .conftest import Http

CMS = "/api/v1/namespaces/default/configmaps"
PODS = "/api/v1/namespaces/default/pods"


async def _seed(http: Http) -> None:
    for name, labels in (
        ("a", {"env": "prod", "tier": "web"}),
        ("b", {"env": "dev", "tier": "web"}),
        ("c", {"env": "prod"}),
        ("d", {"rank": "7"}),
    ):
        await http.post(CMS, {"metadata": {"name": name, "labels": labels}})


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("env=prod", ["a", "c"]),
        ("env==prod", ["a", "c"]),
        ("env!=prod", ["b", "d"]),
        ("env in (dev, prod),tier", ["a", "b"]),
        ("env notin (prod)", ["b", "d"]),
        ("tier", ["a", "b"]),
        ("!tier", ["c", "d"]),
        ("env=prod,!tier", ["c"]),
        ("rank>5", ["d"]),
        ("rank<5", []),
    ],
)
async def test_label_selectors(http: Http, selector: str, expected: list[str]) -> None:
    await _seed(http)
    status, body, _ = await http.get(CMS, params={"labelSelector": selector})
    assert status == 200, body
    assert [i["metadata"]["name"] for i in body["items"]] == expected


async def test_field_selectors(http: Http) -> None:
    await _seed(http)
    _, body, _ = await http.get(CMS, params={"fieldSelector": "metadata.name!=a,metadata.name!=b"})
    assert [i["metadata"]["name"] for i in body["items"]] == ["c", "d"]
    _, body, _ = await http.get(
        "/api/v1/configmaps", params={"fieldSelector": "metadata.namespace=default,metadata.name=c"}
    )
    assert [i["metadata"]["name"] for i in body["items"]] == ["c"]
    await http.post(
        PODS, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    )
    _, body, _ = await http.get(
        PODS, params={"fieldSelector": "status.phase=Pending,spec.nodeName="}
    )
    assert [i["metadata"]["name"] for i in body["items"]] == ["p"]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"fieldSelector": "spec.foo=bar"}, "field label not supported: spec.foo"),
        (
            {"fieldSelector": "metadata.name"},
            "invalid selector: 'metadata.name'; can't understand 'metadata.name'",
        ),
        ({"labelSelector": "env in prod"}, "unable to parse requirement"),
        ({"labelSelector": "-bad-=x"}, "unable to parse requirement"),
        ({"limit": "abc"}, 'strconv.ParseInt: parsing "abc": invalid syntax'),
        ({"watch": "maybe"}, 'strconv.ParseBool: parsing "maybe": invalid syntax'),
    ],
)
async def test_bad_list_options_are_400(http: Http, params: dict[str, str], message: str) -> None:
    status, body, _ = await http.get(CMS, params=params)
    assert status == 400
    assert body["reason"] == "BadRequest" and body["code"] == 400 and body["kind"] == "Status"
    assert body["message"].startswith(message)


async def test_body_errors(http: Http) -> None:
    status, body, _ = await http.request(
        "POST", CMS, data=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert status == 400 and body["reason"] == "BadRequest"
    status, body, _ = await http.post(
        CMS, {"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    )
    assert status == 400
    assert (
        body["message"]
        == "the API version in the data (apps/v1) does not match the expected API version (v1)"
    )
    status, body, _ = await http.post(CMS, {"metadata": {"name": "x", "namespace": "other"}})
    assert status == 400
    assert (
        body["message"]
        == "the namespace of the provided object does not match the namespace sent on the request"
    )
    await http.post(CMS, {"metadata": {"name": "x"}})
    status, body, _ = await http.put(f"{CMS}/x", {"metadata": {"name": "y"}})
    assert status == 400
    assert body["message"] == "the name of the object (y) does not match the name on the URL (x)"
    status, body, _ = await http.request(
        "POST", CMS, data=b"\x00", headers={"Content-Type": "application/vnd.kubernetes.protobuf"}
    )
    assert status == 415 and body["reason"] == "UnsupportedMediaType"


async def test_method_and_delete_options_errors(http: Http) -> None:
    status, body, _ = await http.delete("/api/v1/namespaces", params={})
    assert status == 405 and body["reason"] == "MethodNotAllowed"
    assert body["message"] == 'deletecollection is not supported on resources of kind "namespaces"'
    await http.post(CMS, {"metadata": {"name": "x"}})
    status, body, _ = await http.delete(f"{CMS}/x", {"propagationPolicy": "Sideways"})
    assert status == 422
    assert body["message"].startswith(
        'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Sideways"'
    )
    status, body, _ = await http.request("POST", f"{CMS}/x", json={})
    assert status == 405


async def test_unknown_fields_on_builtin_kinds(http: Http) -> None:
    body = {"metadata": {"name": "u"}, "data": {"a": "1"}, "spec": {"oops": 1}}
    status, result, _ = await http.post(CMS, body, params={"fieldValidation": "Strict"})
    assert status == 400 and result["message"] == 'strict decoding error: unknown field "spec"'
    status, result, headers = await http.post(CMS, body)
    assert status == 201 and "spec" not in result
    assert headers.getall("Warning") == ['299 - "unknown field \\"spec\\""']
    status, result, headers = await http.post(
        CMS, {**body, "metadata": {"name": "v"}}, params={"fieldValidation": "Ignore"}
    )
    assert status == 201 and "Warning" not in headers


async def test_dry_run_does_not_persist(http: Http) -> None:
    status, body, _ = await http.post(CMS, {"metadata": {"name": "dry"}}, params={"dryRun": "All"})
    assert status == 201 and body["metadata"]["name"] == "dry"
    status, _, _ = await http.get(f"{CMS}/dry")
    assert status == 404
