"""The scale subresource (autoscaling/v1 Scale) of Deployments, ReplicaSets, StatefulSets and
of custom resources that declare one, over HTTP and with ``kubectl scale``."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from .conftest import Http, Kubectl
from .crds import WIDGET_CRD

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


def _workload(kind: str, name: str, replicas: int) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "replicas": replicas,
        "selector": {
            "matchLabels": {"app": name},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}],
        },
        "template": {
            "metadata": {"labels": {"app": name, "tier": "a"}},
            "spec": {"containers": [{"name": "c", "image": "img:1"}]},
        },
    }
    if kind == "statefulsets":
        spec["serviceName"] = name
    return {"metadata": {"name": name}, "spec": spec}


@pytest.mark.parametrize("plural", ["deployments", "replicasets", "statefulsets"])
async def test_a_builtin_scale_reads_and_writes_spec_replicas(http: Http, plural: str) -> None:
    base = f"/apis/apps/v1/namespaces/default/{plural}"
    status, created, _ = await http.post(base, _workload(plural, "web", 3))
    assert status == 201

    status, scale, _ = await http.get(f"{base}/web/scale")

    assert status == 200
    assert (scale["apiVersion"], scale["kind"]) == ("autoscaling/v1", "Scale")
    m = created["metadata"]
    assert scale["metadata"] == {
        key: m[key] for key in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
    }
    assert scale["spec"] == {"replicas": 3}
    assert scale["status"] == {"replicas": 0, "selector": "app=web,tier in (a,b)"}

    status, put, _ = await http.put(f"{base}/web/scale", {**scale, "spec": {"replicas": 5}})
    assert status == 200 and put["spec"] == {"replicas": 5}
    _, obj, _ = await http.get(f"{base}/web")
    assert obj["spec"]["replicas"] == 5
    assert obj["metadata"]["generation"] == 2
    assert put["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]

    status, patched, _ = await http.patch(f"{base}/web/scale", {"spec": {"replicas": 0}}, MERGE)
    assert status == 200
    assert patched["spec"] == {}  # autoscaling/v1 leaves out a zero count
    _, obj, _ = await http.get(f"{base}/web")
    assert obj["spec"]["replicas"] == 0


async def test_discovery_names_the_scale_subresource(http: Http) -> None:
    _, apps, _ = await http.get("/apis/apps/v1")
    entry = next(r for r in apps["resources"] if r["name"] == "deployments/scale")
    assert (entry["group"], entry["version"], entry["kind"], entry["verbs"]) == (
        "autoscaling",
        "v1",
        "Scale",
        ["get", "patch", "update"],
    )


async def test_a_stale_resource_version_conflicts_and_bad_replicas_name_the_field(
    http: Http,
) -> None:
    await http.post(DEPLOYMENTS, _workload("deployments", "api", 1))
    _, scale, _ = await http.get(f"{DEPLOYMENTS}/api/scale")
    await http.patch(f"{DEPLOYMENTS}/api/scale", {"spec": {"replicas": 2}}, MERGE)

    status, body, _ = await http.put(f"{DEPLOYMENTS}/api/scale", {**scale, "spec": {"replicas": 4}})
    assert status == 409 and body["reason"] == "Conflict"

    status, body, _ = await http.patch(
        f"{DEPLOYMENTS}/api/scale", {"spec": {"replicas": -1}}, MERGE
    )
    assert status == 422 and body["reason"] == "Invalid"
    assert body["message"] == (
        'Scale.autoscaling "api" is invalid: spec.replicas: Invalid value: -1: '
        "must be greater than or equal to 0"
    )
    ops = [{"op": "replace", "path": "/spec/replicas", "value": "three"}]
    status, body, _ = await http.patch(f"{DEPLOYMENTS}/api/scale", ops, JSON_PATCH)
    assert status == 422 and "spec.replicas" in body["message"]
    status, body, _ = await http.delete(f"{DEPLOYMENTS}/api/scale")
    assert status == 405
    _, obj, _ = await http.get(f"{DEPLOYMENTS}/api")
    assert obj["spec"]["replicas"] == 2


async def test_a_pod_has_no_scale_subresource(http: Http) -> None:
    status, _, _ = await http.get("/api/v1/namespaces/default/pods/p/scale")
    assert status == 404


def _scalable_crd() -> dict[str, Any]:
    crd = copy.deepcopy(WIDGET_CRD)
    version = crd["spec"]["versions"][0]
    version["subresources"]["scale"] = {
        "specReplicasPath": ".spec.size",
        "statusReplicasPath": ".status.count",
        "labelSelectorPath": ".status.selector",
    }
    status_schema = version["schema"]["openAPIV3Schema"]["properties"].setdefault(
        "status", {"type": "object"}
    )
    status_schema.setdefault("properties", {}).update(
        {"count": {"type": "integer"}, "selector": {"type": "string"}}
    )
    return crd


async def test_a_custom_resource_scales_through_its_declared_paths(
    http: Http, kubectl: Kubectl
) -> None:
    status, _, _ = await http.post(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", _scalable_crd()
    )
    assert status == 201
    base = "/apis/example.com/v1/namespaces/default/widgets"
    status, _, _ = await http.post(base, {"metadata": {"name": "w"}, "spec": {"size": 2}})
    assert status == 201
    await http.patch(f"{base}/w/status", {"status": {"count": 2, "selector": "app=w"}}, MERGE)

    _, scale, _ = await http.get(f"{base}/w/scale")
    assert scale["spec"] == {"replicas": 2}
    assert scale["status"] == {"replicas": 2, "selector": "app=w"}

    out = await kubectl.ok("scale", "widgets/w", "--replicas=7")
    assert "widget.example.com/w scaled" in out
    _, obj, _ = await http.get(f"{base}/w")
    assert obj["spec"]["size"] == 7
    # The object's own rules still hold: the CEL rule caps size at maxSize (10).
    status, body, _ = await http.patch(f"{base}/w/scale", {"spec": {"replicas": 11}}, MERGE)
    assert status == 422 and "size must not exceed maxSize" in body["message"]


async def test_kubectl_scale_uses_the_subresource(http: Http, kubectl: Kubectl) -> None:
    await http.post(DEPLOYMENTS, _workload("deployments", "front", 1))

    out = await kubectl.ok("scale", "deployment/front", "--replicas=4")

    assert "deployment.apps/front scaled" in out
    _, obj, _ = await http.get(f"{DEPLOYMENTS}/front")
    assert obj["spec"]["replicas"] == 4
    rc, _, err = await kubectl("scale", "deployment/front", "--replicas=9", "--current-replicas=2")
    assert rc != 0 and "Expected replicas to be 2, was 4" in err


async def test_a_crd_scale_subresource_names_its_paths_under_spec_and_status(http: Http) -> None:
    crd = _scalable_crd()
    crd["spec"]["versions"][0]["subresources"]["scale"] = {
        "specReplicasPath": ".metadata.size",
        "labelSelectorPath": ".selector",
    }

    status, body, _ = await http.post(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd
    )

    assert status == 422
    causes = {(c["field"], c["message"]) for c in body["details"]["causes"]}
    base = "spec.versions[0].subresources.scale"
    assert causes == {
        (
            f"{base}.specReplicasPath",
            'Invalid value: ".metadata.size": should be a json path under .spec',
        ),
        (f"{base}.statusReplicasPath", "Required value"),
        (
            f"{base}.labelSelectorPath",
            'Invalid value: ".selector": should be a json path under either .spec or .status',
        ),
    }
