"""Optimistic concurrency and the four patch types, including server-side apply."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from .conftest import Http

CMS = "/api/v1/namespaces/default/configmaps"
DEPLOYS = "/apis/apps/v1/namespaces/default/deployments"
MERGE = "application/merge-patch+json"
JSONP = "application/json-patch+json"
SMP = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"


def _deployment(
    name: str = "web", *, containers: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": containers
                    or [
                        {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}]},
                        {"name": "side", "image": "side:1"},
                    ],
                    "tolerations": [{"key": "k1", "operator": "Exists"}],
                },
            },
        },
    }


async def test_stale_put_is_conflict_with_exact_message(api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    first = await core.create_namespaced_config_map(
        "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="x"), data={"a": "1"})
    )
    first.data = {"a": "2"}
    await core.replace_namespaced_config_map("x", "default", first)
    first.data = {"a": "3"}
    with pytest.raises(ApiException) as exc:
        await core.replace_namespaced_config_map("x", "default", first)
    assert exc.value.status == 409
    assert json.loads(exc.value.body or b"") == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'Operation cannot be fulfilled on configmaps "x": the object has been modified; '
        "please apply your changes to the latest version and try again",
        "reason": "Conflict",
        "details": {"name": "x", "kind": "configmaps"},
        "code": 409,
    }
    assert (await core.read_namespaced_config_map("x", "default")).data == {"a": "2"}


async def test_grouped_conflict_names_group(http: Http) -> None:
    _, dep, _ = await http.post(DEPLOYS, _deployment())
    stale = dict(dep)
    await http.patch(f"{DEPLOYS}/web", {"spec": {"replicas": 2}}, MERGE)
    status, body, _ = await http.put(f"{DEPLOYS}/web", stale)
    assert status == 409
    assert body["message"].startswith('Operation cannot be fulfilled on deployments.apps "web"')
    assert body["details"] == {"name": "web", "group": "apps", "kind": "deployments"}


async def test_merge_patch(http: Http) -> None:
    await http.post(
        CMS, {"metadata": {"name": "m", "labels": {"a": "1", "b": "2"}}, "data": {"x": "1"}}
    )
    status, body, _ = await http.patch(
        f"{CMS}/m", {"metadata": {"labels": {"b": None, "c": "3"}}, "data": {"y": "2"}}, MERGE
    )
    assert status == 200
    assert body["metadata"]["labels"] == {"a": "1", "c": "3"}
    assert body["data"] == {"x": "1", "y": "2"}


async def test_merge_patch_with_stale_rv_conflicts(http: Http) -> None:
    _, obj, _ = await http.post(CMS, {"metadata": {"name": "r"}})
    await http.patch(f"{CMS}/r", {"data": {"x": "1"}}, MERGE)
    status, body, _ = await http.patch(
        f"{CMS}/r",
        {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]}, "data": {"x": "2"}},
        MERGE,
    )
    assert status == 409 and body["reason"] == "Conflict"


async def test_json_patch(http: Http) -> None:
    await http.post(CMS, {"metadata": {"name": "j"}, "data": {"a": "1"}})
    ops = [
        {"op": "add", "path": "/data/b", "value": "2"},
        {"op": "replace", "path": "/data/a", "value": "9"},
        {"op": "add", "path": "/metadata/labels", "value": {"example.com/z": "1", "k": "v"}},
        {"op": "test", "path": "/data/b", "value": "2"},
    ]
    status, body, _ = await http.patch(f"{CMS}/j", ops, JSONP)
    assert status == 200, body
    assert body["data"] == {"a": "9", "b": "2"}
    status, body, _ = await http.patch(
        f"{CMS}/j", [{"op": "remove", "path": "/metadata/labels/example.com~1z"}], JSONP
    )
    assert status == 200 and body["metadata"]["labels"] == {"k": "v"}
    status, body, _ = await http.patch(
        f"{CMS}/j", [{"op": "test", "path": "/data/a", "value": "0"}], JSONP
    )
    assert status == 422 and body["reason"] == "Invalid"
    status, body, _ = await http.patch(
        f"{CMS}/j", [{"op": "replace", "path": "/data/missing", "value": "0"}], JSONP
    )
    assert status == 422


async def test_strategic_merge_patch_uses_merge_keys(http: Http) -> None:
    await http.post(DEPLOYS, _deployment())
    patch = {
        "metadata": {"finalizers": ["example.com/a"]},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "app", "image": "app:2", "env": [{"name": "B", "value": "2"}]},
                        {"name": "new", "image": "new:1"},
                    ],
                    "tolerations": [{"key": "k2", "operator": "Exists"}],
                }
            }
        },
    }
    status, body, _ = await http.patch(f"{DEPLOYS}/web", patch, SMP)
    assert status == 200, body
    containers = body["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["app", "side", "new"]
    assert containers[0]["image"] == "app:2"
    assert [e["name"] for e in containers[0]["env"]] == ["A", "B"]
    # tolerations carry no merge key in the API: the list is replaced, as on a real server.
    assert body["spec"]["template"]["spec"]["tolerations"] == [{"key": "k2", "operator": "Exists"}]
    status, body, _ = await http.patch(
        f"{DEPLOYS}/web", {"metadata": {"finalizers": ["example.com/b"]}}, SMP
    )
    assert body["metadata"]["finalizers"] == ["example.com/a", "example.com/b"]
    delete_side = {
        "spec": {"template": {"spec": {"containers": [{"name": "side", "$patch": "delete"}]}}}
    }
    status, body, _ = await http.patch(f"{DEPLOYS}/web", delete_side, SMP)
    assert [c["name"] for c in body["spec"]["template"]["spec"]["containers"]] == ["app", "new"]


async def test_strategic_merge_patch_on_custom_resource_is_415(
    http: Http, widget_crd: None
) -> None:
    await http.post(
        "/apis/example.com/v1/namespaces/default/widgets",
        {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"size": 1},
        },
    )
    status, body, _ = await http.patch(
        "/apis/example.com/v1/namespaces/default/widgets/w", {"spec": {"size": 2}}, SMP
    )
    assert status == 415
    assert body["reason"] == "UnsupportedMediaType"


async def test_unknown_patch_type_is_415(http: Http) -> None:
    await http.post(CMS, {"metadata": {"name": "u"}})
    status, body, _ = await http.patch(f"{CMS}/u", {}, "application/x-nonsense")
    assert status == 415 and body["reason"] == "UnsupportedMediaType"


async def test_server_side_apply_ownership_and_conflicts(http: Http) -> None:
    manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "ssa"},
        "data": {"a": "1", "b": "1"},
    }
    status, body, _ = await http.patch(
        f"{CMS}/ssa", manifest, APPLY, params={"fieldManager": "alice"}
    )
    assert status == 201, body
    managed = body["metadata"]["managedFields"]
    assert managed[0]["manager"] == "alice" and managed[0]["operation"] == "Apply"
    assert managed[0]["fieldsV1"] == {"f:data": {"f:a": {}, "f:b": {}}}
    # bob changes a field alice owns: conflict listing the field.
    other = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "ssa"},
        "data": {"a": "2", "c": "1"},
    }
    status, body, _ = await http.patch(f"{CMS}/ssa", other, APPLY, params={"fieldManager": "bob"})
    assert status == 409
    assert body["reason"] == "Conflict"
    assert (
        body["message"] == 'Apply failed with 1 conflict: conflict with "alice" using v1: .data.a'
    )
    assert body["details"]["causes"] == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "alice" using v1',
            "field": ".data.a",
        }
    ]
    # force takes ownership.
    status, body, _ = await http.patch(
        f"{CMS}/ssa", other, APPLY, params={"fieldManager": "bob", "force": "true"}
    )
    assert status == 200 and body["data"] == {"a": "2", "b": "1", "c": "1"}
    owners = {m["manager"]: m["fieldsV1"] for m in body["metadata"]["managedFields"]}
    assert owners == {"alice": {"f:data": {"f:b": {}}}, "bob": {"f:data": {"f:a": {}, "f:c": {}}}}
    # alice stops applying b: it is removed since nobody else owns it.
    status, body, _ = await http.patch(
        f"{CMS}/ssa",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}},
        APPLY,
        params={"fieldManager": "alice"},
    )
    assert body["data"] == {"a": "2", "c": "1"}


async def test_update_then_apply_conflicts_on_changed_field(http: Http) -> None:
    dep = _deployment("d", containers=[{"name": "app", "image": "app:1"}])
    status, _, _ = await http.patch(f"{DEPLOYS}/d", dep, APPLY, params={"fieldManager": "deployer"})
    assert status == 201
    status, _, _ = await http.patch(
        f"{DEPLOYS}/d", {"spec": {"replicas": 5}}, MERGE, params={"fieldManager": "scaler"}
    )
    assert status == 200
    status, body, _ = await http.patch(
        f"{DEPLOYS}/d", dep, APPLY, params={"fieldManager": "deployer"}
    )
    assert status == 409
    assert body["details"]["causes"][0]["field"] == ".spec.replicas"
    assert 'conflict with "scaler"' in body["message"]
    # Applying without the contested field is fine and leaves the scaler's value alone.
    del dep["spec"]["replicas"]
    status, body, _ = await http.patch(
        f"{DEPLOYS}/d", dep, APPLY, params={"fieldManager": "deployer"}
    )
    assert status == 200 and body["spec"]["replicas"] == 5


async def test_apply_merges_associative_lists(http: Http) -> None:
    dep = _deployment("l", containers=[{"name": "a", "image": "a:1"}])
    await http.patch(f"{DEPLOYS}/l", dep, APPLY, params={"fieldManager": "one"})
    sidecar = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "l"},
        "spec": {"template": {"spec": {"containers": [{"name": "b", "image": "b:1"}]}}},
    }
    status, body, _ = await http.patch(
        f"{DEPLOYS}/l", sidecar, APPLY, params={"fieldManager": "two"}
    )
    assert status == 200, body
    assert [c["name"] for c in body["spec"]["template"]["spec"]["containers"]] == ["a", "b"]


async def test_apply_requires_field_manager(http: Http) -> None:
    status, body, _ = await http.patch(
        f"{CMS}/nofm",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nofm"}},
        APPLY,
    )
    assert status == 422
    assert body["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required '
        "for apply patch"
    )


async def test_patch_missing_object_is_404(http: Http) -> None:
    status, body, _ = await http.patch(f"{CMS}/ghost", {"data": {"a": "1"}}, MERGE)
    assert status == 404 and body["message"] == 'configmaps "ghost" not found'
