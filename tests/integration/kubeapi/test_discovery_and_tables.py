"""Discovery, OpenAPI v3, Table output and metadata-only responses."""

from __future__ import annotations

from .conftest import Http

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


async def test_version(http: Http) -> None:
    status, body, _ = await http.get("/version")
    assert status == 200 and body["major"] == "1" and body["gitVersion"].startswith("v1.")


async def test_core_and_group_discovery(http: Http) -> None:
    _, api, _ = await http.get("/api")
    assert api["kind"] == "APIVersions" and api["versions"] == ["v1"]
    _, core, _ = await http.get("/api/v1")
    entries = {r["name"]: r for r in core["resources"]}
    assert entries["pods"]["namespaced"] is True and entries["pods"]["shortNames"] == ["po"]
    assert set(entries["pods"]["verbs"]) == {
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    }
    assert entries["pods/status"]["verbs"] == ["get", "patch", "update"]
    assert entries["pods/binding"] == {
        "name": "pods/binding",
        "singularName": "",
        "namespaced": True,
        "kind": "Binding",
        "verbs": ["create"],
    }
    assert entries["nodes"]["namespaced"] is False
    _, groups, _ = await http.get("/apis")
    by_name = {g["name"]: g for g in groups["groups"]}
    assert by_name["resource.k8s.io"]["preferredVersion"]["version"] == "v1"
    # Beta versions are off by default (--runtime-config turns them on).
    assert [v["version"] for v in by_name["resource.k8s.io"]["versions"]] == ["v1"]
    assert {
        "apps",
        "batch",
        "coordination.k8s.io",
        "events.k8s.io",
        "apiextensions.k8s.io",
        "admissionregistration.k8s.io",
    } <= set(by_name)
    _, group, _ = await http.get("/apis/apps")
    assert group["kind"] == "APIGroup" and group["name"] == "apps"
    _, dra, _ = await http.get("/apis/resource.k8s.io/v1")
    assert {r["name"] for r in dra["resources"]} >= {
        "deviceclasses",
        "resourceclaims",
        "resourceclaims/status",
        "resourceclaimtemplates",
        "resourceslices",
    }


async def test_openapi_v3(http: Http, widget_crd: None) -> None:
    _, index, _ = await http.get("/openapi/v3")
    assert "api/v1" in index["paths"] and "apis/example.com/v1" in index["paths"]
    status, doc, _ = await http.get(index["paths"]["apis/apps/v1"]["serverRelativeURL"])
    assert status == 200 and doc["openapi"].startswith("3.")
    patch = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "apps",
        "version": "v1",
        "kind": "Deployment",
    }
    assert "fieldValidation" in {p["name"] for p in patch["parameters"]}
    assert "application/strategic-merge-patch+json" in patch["requestBody"]["content"]
    schema = doc["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"]
    assert schema["x-kubernetes-group-version-kind"] == [
        {"group": "apps", "kind": "Deployment", "version": "v1"}
    ]
    _, crd_doc, _ = await http.get("/openapi/v3/apis/example.com/v1")
    widget = crd_doc["components"]["schemas"]["com.example.v1.Widget"]
    assert widget["properties"]["spec"]["properties"]["size"]["type"] == "integer"
    crd_patch = crd_doc["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"][
        "patch"
    ]
    assert "application/strategic-merge-patch+json" not in crd_patch["requestBody"]["content"]


async def test_table_for_builtin_and_crd(http: Http, widget_crd: None) -> None:
    await http.post(
        "/api/v1/namespaces/default/configmaps",
        {"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}},
    )
    status, table, headers = await http.get(
        "/api/v1/namespaces/default/configmaps", headers={"Accept": TABLE}
    )
    assert status == 200 and table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert headers["Content-Type"].startswith("application/json;as=Table")
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Data", "Age"]
    assert table["rows"][0]["cells"][:2] == ["c", "2"]
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    await http.post(
        "/apis/example.com/v1/namespaces/default/widgets",
        {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"size": 3},
        },
    )
    await http.patch(
        "/apis/example.com/v1/namespaces/default/widgets/w/status",
        {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
        "application/merge-patch+json",
    )
    _, table, _ = await http.get(
        "/apis/example.com/v1/namespaces/default/widgets/w",
        headers={"Accept": TABLE},
        params={"includeObject": "Object"},
    )
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Size", "Ready", "Age"]
    cells = table["rows"][0]["cells"]
    assert cells[:3] == ["w", 3, "True"] and cells[3].endswith("s")
    assert table["rows"][0]["object"]["kind"] == "Widget"


async def test_partial_object_metadata_list(http: Http) -> None:
    await http.post(
        "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "c"}, "data": {"a": "1"}}
    )
    _, body, _ = await http.get(
        "/api/v1/namespaces/default/configmaps",
        headers={"Accept": "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"},
    )
    assert body["kind"] == "PartialObjectMetadataList"
    assert body["items"][0] == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": body["items"][0]["metadata"],
    }
    assert "data" not in body["items"][0]


async def test_protobuf_only_accept_is_406(http: Http) -> None:
    status, body, _ = await http.get(
        "/api/v1/namespaces", headers={"Accept": "application/vnd.kubernetes.protobuf"}
    )
    assert status == 406 and body["reason"] == "NotAcceptable"
