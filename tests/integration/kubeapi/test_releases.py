"""The emulator at each Kubernetes release, over HTTP and through real kubectl: /version,
discovery, OpenAPI and kubectl agree on what the release serves; a disabled gate's fields are
dropped on write; --runtime-config turns on what a platform team turns on."""

from __future__ import annotations

from typing import Any

import pytest

from sim.kubeapi import ServerConfig
from tests.support.releases import at_release, rules_opted_in

from .conftest import Http, Kubectl

RELEASES = ("1.34", "1.35", "1.36", "1.37")
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
TAINT = {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}


def at(version: str, **settings: Any) -> ServerConfig:
    """Settings at a release; a test parametrized with ``kube_config`` gets its server so."""
    return at_release(version, **settings)[0]


def slice_body(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "n1",
            "pool": {"name": "n1", "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "taints": [TAINT]}],
        },
    }


@pytest.mark.parametrize("kube_config", [pytest.param(at(v), id=v) for v in RELEASES])
async def test_version_discovery_openapi_and_kubectl_agree(
    http: Http, kubectl: Kubectl, kube_config: ServerConfig
) -> None:
    minor = kube_config.kubernetes_version.split(".")[1]
    rules_served = kube_config.kubernetes_version == "1.37"
    _, version, _ = await http.get("/version")
    assert (version["major"], version["minor"]) == ("1", minor)
    assert f"Server Version: v1.{minor}.0" in await kubectl.ok("version")

    _, group, _ = await http.get("/apis/resource.k8s.io")
    assert [v["version"] for v in group["versions"]] == ["v1"]
    _, resources, _ = await http.get("/apis/resource.k8s.io/v1")
    names = {r["name"] for r in resources["resources"] if "/" not in r["name"]}
    expected = {"deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices"}
    assert names == expected | ({"devicetaintrules"} if rules_served else set())
    status, _, _ = await http.get("/apis/resource.k8s.io/v1/devicetaintrules")
    assert status == (200 if rules_served else 404)
    status, _, _ = await http.get("/apis/resource.k8s.io/v1beta2")
    assert status == 404

    listed = await kubectl.ok("api-resources", "--api-group=resource.k8s.io", "-o", "name")
    assert set(listed.split()) == {f"{name}.resource.k8s.io" for name in names}
    _, index, _ = await http.get("/openapi/v3")
    assert [p for p in index["paths"] if p.startswith("apis/resource.k8s.io/")] == [
        "apis/resource.k8s.io/v1"
    ]
    _, document, _ = await http.get("/openapi/v3/apis/resource.k8s.io/v1")
    assert ("/apis/resource.k8s.io/v1/devicetaintrules" in document["paths"]) is rules_served


@pytest.mark.parametrize(
    ("kube_config", "kept"),
    [
        pytest.param(at("1.35"), False, id="1.35"),
        pytest.param(at("1.36"), True, id="1.36"),
        pytest.param(at("1.35", feature_gates={"DRADeviceTaints": True}), True, id="1.35+gate"),
    ],
)
async def test_device_taints_of_a_slice_are_dropped_while_the_gate_is_off(
    http: Http, kept: bool
) -> None:
    status, created, _ = await http.post(SLICES, slice_body("n1-gpu"))
    assert status == 201, created
    (device,) = created["spec"]["devices"]
    assert ("taints" in device) is kept
    _, read, _ = await http.get(f"{SLICES}/n1-gpu")
    assert read["spec"]["devices"] == created["spec"]["devices"]


@pytest.mark.parametrize(
    "kube_config",
    [pytest.param(rules_opted_in("1.36")[0], id="1.36")],
)
async def test_runtime_config_serves_the_taint_rules_beta_of_1_36(
    http: Http, kubectl: Kubectl
) -> None:
    _, group, _ = await http.get("/apis/resource.k8s.io")
    assert [v["version"] for v in group["versions"]] == ["v1", "v1beta2"]
    assert group["preferredVersion"]["version"] == "v1"
    rule = {
        "apiVersion": "resource.k8s.io/v1beta2",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "gpu-2"},
        "spec": {"deviceSelector": {"device": "gpu-2"}, "taint": TAINT},
    }
    status, created, _ = await http.post("/apis/resource.k8s.io/v1beta2/devicetaintrules", rule)
    assert status == 201, created
    assert created["apiVersion"] == "resource.k8s.io/v1beta2"
    assert "devicetaintrules.resource.k8s.io" in await kubectl.ok(
        "api-resources", "--api-group=resource.k8s.io", "-o", "name"
    )
    assert "gpu-2" in await kubectl.ok("get", "devicetaintrules.v1beta2.resource.k8s.io")


@pytest.mark.parametrize(
    "kube_config",
    [pytest.param(rules_opted_in("1.34")[0], id="1.34")],
)
async def test_1_34_has_no_none_effect_and_its_alpha_rules_no_status(http: Http) -> None:
    none_taint = slice_body("n1-gpu")
    none_taint["spec"]["devices"][0]["taints"] = [{**TAINT, "effect": "None"}]
    status, refused, _ = await http.post(SLICES, none_taint)
    assert status == 422, refused
    assert refused["details"]["causes"][0]["field"] == "spec.devices[0].taints[0].effect"

    rules = "/apis/resource.k8s.io/v1alpha3/devicetaintrules"
    rule = {"metadata": {"name": "r"}, "spec": {"taint": TAINT}}
    status, created, _ = await http.post(rules, rule)
    assert status == 201 and "status" not in created, created
    status, _, _ = await http.get(f"{rules}/r/status")
    assert status == 404
    _, resources, _ = await http.get("/apis/resource.k8s.io/v1alpha3")
    assert [r["name"] for r in resources["resources"]] == ["devicetaintrules"]
