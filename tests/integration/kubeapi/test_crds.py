"""CustomResourceDefinitions: served at once, pruned, defaulted, validated (schema and CEL)."""

from __future__ import annotations

import copy
from typing import Any

from kubernetes_asyncio import client

from sim.kubeapi import KubeServer
from tests.support.wait import wait_for

from .conftest import Http
from .crds import WIDGET_CRD, widget

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"
MERGE = "application/merge-patch+json"


async def test_crd_is_served_at_once(http: Http) -> None:
    status, _, _ = await http.get("/apis/example.com/v1")
    assert status == 404
    status, crd, _ = await http.post(CRDS, WIDGET_CRD)
    assert status == 201
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}
    assert crd["status"]["acceptedNames"]["kind"] == "Widget"
    assert crd["status"]["storedVersions"] == ["v1"]
    _, groups, _ = await http.get("/apis")
    assert any(g["name"] == "example.com" for g in groups["groups"])
    _, resources, _ = await http.get("/apis/example.com/v1")
    names = {r["name"]: r for r in resources["resources"]}
    assert names["widgets"]["kind"] == "Widget" and names["widgets"]["shortNames"] == ["wd"]
    assert names["widgets/status"]["verbs"] == ["get", "patch", "update"]
    status, _, _ = await http.post(WIDGETS, widget("w", size=1))
    assert status == 201


async def test_pruning_and_defaulting(http: Http, widget_crd: None) -> None:
    obj = widget("w", size=2, unknown="x", extra={"anything": {"goes": 1}})
    obj["metadata"]["bogus"] = 1
    obj["topLevel"] = True
    status, body, headers = await http.post(WIDGETS, obj)
    assert status == 201, body
    assert body["spec"] == {
        "size": 2,
        "maxSize": 10,
        "mode": "fast",
        "extra": {"anything": {"goes": 1}},
    }
    assert "topLevel" not in body and "bogus" not in body["metadata"]
    warnings = headers.getall("Warning", [])
    assert any('unknown field \\"spec.unknown\\"' in w for w in warnings)


async def test_strict_field_validation_rejects_unknown(http: Http, widget_crd: None) -> None:
    status, body, _ = await http.post(
        WIDGETS, widget("w", size=2, nope=1), params={"fieldValidation": "Strict"}
    )
    assert status == 400
    assert body["message"] == 'strict decoding error: unknown field "spec.nope"'


async def test_schema_validation_causes_name_fields(http: Http, widget_crd: None) -> None:
    bad = widget("w", size="big", mode="turbo", name="TOO-LONG-NAME", tags=["a", "a"])
    status, body, _ = await http.post(WIDGETS, bad)
    assert status == 422
    assert body["reason"] == "Invalid"
    assert body["details"]["group"] == "example.com" and body["details"]["kind"] == "Widget"
    causes = {c["field"]: c for c in body["details"]["causes"]}
    assert causes["spec.size"] == {
        "reason": "FieldValueTypeInvalid",
        "message": 'Invalid value: "big": spec.size in body must be of type integer: "string"',
        "field": "spec.size",
    }
    assert causes["spec.mode"]["reason"] == "FieldValueNotSupported"
    assert (
        causes["spec.mode"]["message"]
        == 'Unsupported value: "turbo": supported values: "fast", "slow"'
    )
    assert causes["spec.name"]["reason"] in ("FieldValueTooLong", "FieldValueInvalid")
    assert causes["spec.tags[1]"]["reason"] == "FieldValueDuplicate"
    assert body["message"].startswith('Widget.example.com "w" is invalid: [')


async def test_required_and_minimum(http: Http, widget_crd: None) -> None:
    status, body, _ = await http.post(WIDGETS, widget("w", maxSize=3))
    assert status == 422
    assert body["details"]["causes"] == [
        {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.size"},
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "null": some validation rules were not checked because the '
            "object was invalid; correct the existing errors to complete validation",
            "field": "<nil>",
        },
    ]
    status, body, _ = await http.post(WIDGETS, widget("w", size=-1))
    assert status == 422
    assert body["details"]["causes"][0]["message"] == (
        "Invalid value: -1: spec.size in body should be greater than or equal to 0"
    )


async def test_cel_rules(http: Http, widget_crd: None) -> None:
    status, body, _ = await http.post(WIDGETS, widget("w", size=11))
    assert status == 422
    assert (
        body["message"]
        == 'Widget.example.com "w" is invalid: spec: Invalid value: "object": size must not '
        "exceed maxSize"
    )
    status, _, _ = await http.post(WIDGETS, widget("w", size=5, mode="slow"))
    assert status == 201
    # Transition rule with oldSelf only runs on update.
    status, body, _ = await http.patch(f"{WIDGETS}/w", {"spec": {"mode": "fast"}}, MERGE)
    assert status == 422
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "object": mode is immutable',
            "field": "spec.mode",
        }
    ]
    status, _, _ = await http.patch(f"{WIDGETS}/w", {"spec": {"size": 6}}, MERGE)
    assert status == 200


async def test_put_without_rv_is_rejected_for_custom_resources(
    http: Http, widget_crd: None
) -> None:
    await http.post(WIDGETS, widget("w", size=1))
    status, body, _ = await http.put(f"{WIDGETS}/w", widget("w", size=2))
    assert status == 422
    assert (
        "metadata.resourceVersion: Invalid value: 0: must be specified for an update"
        in body["message"]
    )


async def test_selectable_fields_and_unsupported_field(http: Http, widget_crd: None) -> None:
    await http.post(WIDGETS, widget("a", size=1, mode="slow"))
    await http.post(WIDGETS, widget("b", size=1))
    _, body, _ = await http.get(WIDGETS, params={"fieldSelector": "spec.mode=slow"})
    assert [i["metadata"]["name"] for i in body["items"]] == ["a"]
    status, body, _ = await http.get(WIDGETS, params={"fieldSelector": "spec.size=1"})
    assert status == 400 and body["message"] == "field label not supported: spec.size"


async def test_invalid_crd_rejected(http: Http) -> None:
    crd = copy.deepcopy(WIDGET_CRD)
    crd["metadata"]["name"] = "wrong.example.com"
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][
        "size"
    ] = {}
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "x-kubernetes-validations"
    ] = [{"rule": "self.size <"}]
    status, body, _ = await http.post(CRDS, crd)
    assert status == 422
    fields = {c["field"] for c in body["details"]["causes"]}
    assert "metadata.name" in fields
    assert (
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[size].type" in fields
    )
    assert (
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"
        in fields
    )


async def test_deleting_crd_removes_objects_and_endpoints(
    http: Http, widget_crd: None, kube: KubeServer
) -> None:
    await http.post(WIDGETS, widget("a", size=1))
    held = widget("held", size=1)
    held["metadata"]["finalizers"] = ["example.com/x"]
    await http.post(WIDGETS, held)
    status, crd, _ = await http.delete(f"{CRDS}/widgets.example.com")
    assert status == 200 and crd["metadata"]["deletionTimestamp"]

    async def only_held_left() -> bool:
        _, body, _ = await http.get(WIDGETS)
        return [i["metadata"]["name"] for i in body.get("items", [])] == ["held"]

    await wait_for(only_held_left, what="unheld widget removed")
    status, body, _ = await http.post(WIDGETS, widget("new", size=1))
    assert status == 405
    assert body["message"] == "create not allowed while custom resource definition is terminating"
    await http.patch(f"{WIDGETS}/held", {"metadata": {"finalizers": None}}, MERGE)

    async def gone() -> bool:
        status, _, _ = await http.get("/apis/example.com/v1")
        return status == 404

    await wait_for(gone, what="CRD and its endpoints gone")
    status, _, _ = await http.get(f"{CRDS}/widgets.example.com")
    assert status == 404


async def test_custom_objects_api(api_client: client.ApiClient, widget_crd: None) -> None:
    api: Any = client.CustomObjectsApi(api_client)  # _content_type is outside the typed stubs
    created = await api.create_namespaced_custom_object(
        "example.com", "v1", "default", "widgets", widget("w", size=1)
    )
    assert created["spec"]["maxSize"] == 10
    listed = await api.list_namespaced_custom_object("example.com", "v1", "default", "widgets")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["w"]
    assert listed["items"][0]["kind"] == "Widget"  # unstructured lists keep type meta
    patched = await api.patch_namespaced_custom_object_status(
        "example.com",
        "v1",
        "default",
        "widgets",
        "w",
        {"status": {"observedGeneration": 1}},
        _content_type="application/merge-patch+json",
    )
    assert patched["status"] == {"observedGeneration": 1}


async def test_multiple_versions_share_storage(http: Http) -> None:
    crd: dict[str, Any] = copy.deepcopy(WIDGET_CRD)
    v1 = crd["spec"]["versions"][0]
    v2 = copy.deepcopy(v1)
    v2["name"] = "v2beta1"
    v2["storage"] = False
    crd["spec"]["versions"].append(v2)
    status, _, _ = await http.post(CRDS, crd)
    assert status == 201
    await http.post(WIDGETS, widget("w", size=1))
    status, body, _ = await http.get("/apis/example.com/v2beta1/namespaces/default/widgets/w")
    assert status == 200 and body["apiVersion"] == "example.com/v2beta1"
    _, group, _ = await http.get("/apis/example.com")
    assert group["preferredVersion"]["version"] == "v1"
    assert [v["version"] for v in group["versions"]] == ["v1", "v2beta1"]
