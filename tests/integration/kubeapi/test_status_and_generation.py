"""The status subresource and generation rules."""

from __future__ import annotations

from typing import Any

from .conftest import Http
from .crds import widget

DEPLOYS = "/apis/apps/v1/namespaces/default/deployments"
WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"
MERGE = "application/merge-patch+json"


def _deployment() -> dict[str, Any]:
    return {
        "metadata": {"name": "d"},
        "spec": {
            "selector": {"matchLabels": {"app": "d"}},
            "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
        },
        "status": {"replicas": 99},
    }


async def test_create_strips_status(http: Http) -> None:
    status, body, _ = await http.post(DEPLOYS, _deployment())
    assert status == 201
    assert body.get("status", {}).get("replicas") is None


async def test_main_endpoint_keeps_status(http: Http) -> None:
    await http.post(DEPLOYS, _deployment())
    await http.patch(f"{DEPLOYS}/d/status", {"status": {"replicas": 3}}, MERGE)
    status, body, _ = await http.patch(
        f"{DEPLOYS}/d", {"spec": {"replicas": 2}, "status": {"replicas": 7}}, MERGE
    )
    assert status == 200
    assert body["spec"]["replicas"] == 2 and body["status"]["replicas"] == 3


async def test_status_endpoint_keeps_everything_else(http: Http) -> None:
    _, created, _ = await http.post(DEPLOYS, _deployment())
    created["spec"]["replicas"] = 5
    created["metadata"]["labels"] = {"x": "y"}
    created["status"] = {"replicas": 4, "observedGeneration": 1}
    status, body, _ = await http.put(f"{DEPLOYS}/d/status", created)
    assert status == 200, body
    assert body["status"] == {"replicas": 4, "observedGeneration": 1}
    assert body["spec"]["replicas"] == 1
    assert "labels" not in body["metadata"]
    assert body["metadata"]["generation"] == 1


async def test_generation_bumps_on_spec_change_only(http: Http) -> None:
    await http.post(DEPLOYS, _deployment())
    _, body, _ = await http.patch(f"{DEPLOYS}/d", {"metadata": {"labels": {"a": "b"}}}, MERGE)
    assert body["metadata"]["generation"] == 1
    _, body, _ = await http.patch(f"{DEPLOYS}/d/status", {"status": {"replicas": 1}}, MERGE)
    assert body["metadata"]["generation"] == 1
    _, body, _ = await http.patch(f"{DEPLOYS}/d", {"spec": {"replicas": 3}}, MERGE)
    assert body["metadata"]["generation"] == 2
    # observedGeneration is only what a client writes.
    assert "observedGeneration" not in body.get("status", {})


async def test_custom_resource_status_subresource(http: Http, widget_crd: None) -> None:
    obj = widget("w", size=1)
    obj["status"] = {"observedGeneration": 5}
    status, body, _ = await http.post(WIDGETS, obj)
    assert status == 201 and "status" not in body
    assert body["metadata"]["generation"] == 1
    _, body, _ = await http.patch(
        f"{WIDGETS}/w/status", {"status": {"observedGeneration": 1}, "spec": {"size": 9}}, MERGE
    )
    assert body["status"] == {"observedGeneration": 1} and body["spec"]["size"] == 1
    _, body, _ = await http.patch(
        f"{WIDGETS}/w", {"spec": {"size": 2}, "status": {"observedGeneration": 7}}, MERGE
    )
    assert body["spec"]["size"] == 2 and body["status"] == {"observedGeneration": 1}
    assert body["metadata"]["generation"] == 2
