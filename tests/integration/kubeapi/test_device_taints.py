"""DRA device taints in the emulator: DeviceTaintRule and ResourceSlice device taints."""

from __future__ import annotations

from typing import Any

import pytest

from sim.kubeapi import ServerConfig

from .conftest import Http, with_beta_apis


@pytest.fixture
def kube_config() -> ServerConfig:
    """DRA's beta versions served too: some tests here read and write them."""
    return with_beta_apis()


RULES = "/apis/resource.k8s.io/v1/devicetaintrules"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
MERGE = "application/merge-patch+json"


def _rule(name: str, **taint: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "deviceSelector": {"driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-2"},
            "taint": {"key": "cdo.dev/gpu-fault", "value": "xid-48", **taint},
        },
    }


def _causes(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["field"], c["reason"]) for c in body["details"]["causes"]]


async def test_rule_is_cluster_scoped_stamped_and_served_as_v1beta2(http: Http) -> None:
    status, created, _ = await http.post(RULES, _rule("n1-gpu-2", effect="NoExecute"))
    assert status == 201, created
    assert created["metadata"]["generation"] == 1
    assert created["spec"]["taint"]["timeAdded"]
    status, beta, _ = await http.get("/apis/resource.k8s.io/v1beta2/devicetaintrules/n1-gpu-2")
    assert status == 200 and beta["spec"]["taint"]["effect"] == "NoExecute"


async def test_an_effect_change_that_keeps_the_old_time_is_restamped(http: Http) -> None:
    old = "2020-01-01T00:00:00Z"
    status, created, _ = await http.post(RULES, _rule("r", effect="None", timeAdded=old))
    assert status == 201 and created["spec"]["taint"]["timeAdded"] == old
    status, same, _ = await http.patch(
        f"{RULES}/r", {"spec": {"taint": {"value": "xid-79"}}}, content_type=MERGE
    )
    assert status == 200 and same["spec"]["taint"]["timeAdded"] == old
    status, patched, _ = await http.patch(
        f"{RULES}/r", {"spec": {"taint": {"effect": "NoExecute"}}}, content_type=MERGE
    )
    assert status == 200, patched
    assert patched["spec"]["taint"]["timeAdded"] > old
    assert patched["metadata"]["generation"] == 3


async def test_rule_rejects_a_bad_effect_and_names_the_field(http: Http) -> None:
    status, body, _ = await http.post(RULES, _rule("bad", effect="PreferNoSchedule"))
    assert status == 422, body
    assert ("spec.taint.effect", "FieldValueNotSupported") in _causes(body)
    status, body, _ = await http.post(RULES, {"metadata": {"name": "empty"}, "spec": {}})
    assert status == 422
    assert ("spec.taint", "FieldValueRequired") in _causes(body)


async def test_slice_device_taints_are_validated_and_stamped(http: Http) -> None:
    def slice_(effect: str) -> dict[str, Any]:
        return {
            "metadata": {"name": f"n1-gpu-{effect.lower()}"},
            "spec": {
                "driver": "gpu.nvidia.com",
                "nodeName": "n1",
                "pool": {"name": "n1", "resourceSliceCount": 1},
                "devices": [
                    {
                        "name": "gpu-0",
                        "taints": [{"key": "gpu.nvidia.com/xid", "value": "48", "effect": effect}],
                    }
                ],
            },
        }

    status, body, _ = await http.post(SLICES, slice_("Sometimes"))
    assert status == 422, body
    assert ("spec.devices[0].taints[0].effect", "FieldValueNotSupported") in _causes(body)
    status, body, _ = await http.post(SLICES, slice_("NoSchedule"))
    assert status == 201, body
    assert body["spec"]["devices"][0]["taints"][0]["timeAdded"]
