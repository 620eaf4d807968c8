"""CRUD through kubernetes-asyncio's typed client, and server-set metadata."""

from __future__ import annotations

import json

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from sim.kubeapi import KubeServer

from .conftest import Http


def _cm(name: str, **data: str) -> client.V1ConfigMap:
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name), data=data)


async def test_seeded_namespaces(api_client: client.ApiClient) -> None:
    names = {ns.metadata.name for ns in (await client.CoreV1Api(api_client).list_namespace()).items}
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= names


async def test_create_sets_server_metadata(api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    created = await core.create_namespaced_config_map("default", _cm("c1", a="1"))
    meta = created.metadata
    assert meta.uid and len(meta.uid) == 36
    assert meta.creation_timestamp is not None
    assert int(meta.resource_version) > 0
    assert meta.namespace == "default"
    read = await core.read_namespaced_config_map("c1", "default")
    assert read.data == {"a": "1"} and read.metadata.uid == meta.uid


async def test_generate_name(api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(generate_name="gen-"))
    first = await core.create_namespaced_config_map("default", body)
    second = await core.create_namespaced_config_map("default", body)
    assert first.metadata.name.startswith("gen-") and len(first.metadata.name) == 9
    assert first.metadata.name != second.metadata.name


async def test_generation_set_on_create_for_spec_kinds(api_client: client.ApiClient) -> None:
    apps = client.AppsV1Api(api_client)
    dep = await apps.create_namespaced_deployment("default", _deployment("d1"))
    assert dep.metadata.generation == 1


async def test_duplicate_is_already_exists(api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    await core.create_namespaced_config_map("default", _cm("dup"))
    with pytest.raises(ApiException) as exc:
        await core.create_namespaced_config_map("default", _cm("dup"))
    assert exc.value.status == 409
    body = json.loads(exc.value.body or b"")
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'configmaps "dup" already exists',
        "reason": "AlreadyExists",
        "details": {"name": "dup", "kind": "configmaps"},
        "code": 409,
    }


async def test_missing_name_is_422(http: Http) -> None:
    status, body, _ = await http.post(
        "/api/v1/namespaces/default/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}},
    )
    assert status == 422
    assert body["reason"] == "Invalid"
    assert body["message"] == (
        'ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required'
    )
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueRequired",
            "message": "Required value: name or generateName is required",
            "field": "metadata.name",
        }
    ]


async def test_write_into_missing_namespace_is_404(api_client: client.ApiClient) -> None:
    with pytest.raises(ApiException) as exc:
        await client.CoreV1Api(api_client).create_namespaced_config_map("nope", _cm("x"))
    assert exc.value.status == 404
    body = json.loads(exc.value.body or b"")
    assert body["message"] == 'namespaces "nope" not found'
    assert body["details"] == {"name": "nope", "kind": "namespaces"}


async def test_update_and_delete(api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    created = await core.create_namespaced_config_map("default", _cm("u1", a="1"))
    created.data = {"a": "2"}
    updated = await core.replace_namespaced_config_map("u1", "default", created)
    assert updated.data == {"a": "2"}
    assert int(updated.metadata.resource_version) > int(created.metadata.resource_version)
    status = await core.delete_namespaced_config_map("u1", "default")
    assert status.status == "Success" and status.details.name == "u1"
    with pytest.raises(ApiException) as exc:
        await core.read_namespaced_config_map("u1", "default")
    assert exc.value.status == 404


async def test_cluster_scoped_and_cluster_wide_lists(api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    await core.create_node(
        client.V1Node(metadata=client.V1ObjectMeta(name="n1", labels={"rack": "r1"}))
    )
    nodes = await core.list_node()
    assert [n.metadata.name for n in nodes.items] == ["n1"]
    assert not nodes.items[0].metadata.namespace
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="team-a")))
    await core.create_namespaced_config_map("team-a", _cm("x"))
    await core.create_namespaced_config_map("default", _cm("x"))
    every = await core.list_config_map_for_all_namespaces()
    assert sorted((c.metadata.namespace, c.metadata.name) for c in every.items) == [
        ("default", "x"),
        ("team-a", "x"),
    ]


async def test_unknown_path_is_404_status(http: Http) -> None:
    status, body, _ = await http.get("/api/v1/widgets")
    assert status == 404
    assert body["message"] == "the server could not find the requested resource"
    assert body["reason"] == "NotFound"


async def test_list_items_carry_no_type_meta_for_builtins(http: Http, kube: KubeServer) -> None:
    await http.post("/api/v1/namespaces/default/configmaps", {"metadata": {"name": "t"}})
    status, body, _ = await http.get("/api/v1/namespaces/default/configmaps")
    assert status == 200
    assert body["kind"] == "ConfigMapList" and body["apiVersion"] == "v1"
    assert "kind" not in body["items"][0] and body["items"][0]["metadata"]["name"] == "t"
    status, single, _ = await http.get("/api/v1/namespaces/default/configmaps/t")
    assert single["kind"] == "ConfigMap" and single["apiVersion"] == "v1"


def _deployment(name: str) -> client.V1Deployment:
    labels = {"app": name}
    return client.V1Deployment(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1DeploymentSpec(
            replicas=1,
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox:1")]),
            ),
        ),
    )
