"""Fields of disabled gates dropped on write (unless the stored object uses them), and the
taint effect ``None`` refused before 1.35."""

from __future__ import annotations

from typing import Any

from sim.kubeapi.releases import Release
from sim.kubeapi.releases.fields import (
    CLAIMS,
    SLICES,
    TAINT_RULES,
    TEMPLATES,
    drop_disabled_fields,
    drop_disabled_status_fields,
    release_errors,
)

TAINT = {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}


def slice_(**device: Any) -> dict[str, Any]:
    return {"spec": {"driver": "gpu.nvidia.com", "devices": [{"name": "gpu-0", **device}]}}


def test_device_taints_are_dropped_while_dra_device_taints_is_off() -> None:
    new = slice_(taints=[TAINT], attributes={"index": {"int": 0}})
    drop_disabled_fields(SLICES, new, None, Release.of("1.35"))
    assert new["spec"]["devices"] == [{"name": "gpu-0", "attributes": {"index": {"int": 0}}}]

    kept = slice_(taints=[TAINT])
    drop_disabled_fields(SLICES, kept, None, Release.of("1.36"))
    assert kept["spec"]["devices"][0]["taints"] == [TAINT]


def test_a_field_already_in_use_is_kept_when_its_gate_is_off() -> None:
    old = slice_(taints=[TAINT])
    new = slice_(taints=[TAINT, {**TAINT, "value": "48"}])
    drop_disabled_fields(SLICES, new, old, Release.of("1.35"))
    assert len(new["spec"]["devices"][0]["taints"]) == 2


def test_partitionable_and_binding_fields_of_a_slice() -> None:
    new = slice_(consumesCounters=[{"counterSet": "a"}], bindingConditions=["x"], bindsToNode=True)
    new["spec"]["sharedCounters"] = [{"name": "a"}]
    drop_disabled_fields(SLICES, new, None, Release.of("1.34"))
    assert "sharedCounters" not in new["spec"]
    assert new["spec"]["devices"] == [{"name": "gpu-0"}]
    on = slice_(bindingConditions=["x"])
    drop_disabled_fields(SLICES, on, None, Release.of("1.36"))
    assert on["spec"]["devices"][0]["bindingConditions"] == ["x"]


def _claim_spec() -> dict[str, Any]:
    return {
        "devices": {
            "requests": [
                {
                    "name": "gpu",
                    "exactly": {
                        "deviceClassName": "gpu.nvidia.com",
                        "tolerations": [{"key": "k", "operator": "Exists"}],
                        "capacity": {"requests": {"memory": "10Gi"}},
                    },
                }
            ],
            "constraints": [{"requests": ["gpu"], "distinctAttribute": "x"}],
        }
    }


def test_claim_tolerations_and_capacity_are_dropped_before_1_36() -> None:
    claim = {"spec": _claim_spec()}
    drop_disabled_fields(CLAIMS, claim, None, Release.of("1.35"))
    assert claim["spec"]["devices"]["requests"][0]["exactly"] == {
        "deviceClassName": "gpu.nvidia.com"
    }
    assert claim["spec"]["devices"]["constraints"] == [{"requests": ["gpu"]}]
    template = {"spec": {"spec": _claim_spec()}}
    drop_disabled_fields(TEMPLATES, template, None, Release.of("1.36"))
    assert template["spec"]["spec"] == _claim_spec()


def test_claim_status_fields_of_disabled_gates() -> None:
    result = {"device": "gpu-0", "shareID": "s", "bindingConditions": ["ready"]}
    new = {"status": {"allocation": {"devices": {"results": [dict(result)]}}}}
    drop_disabled_status_fields(CLAIMS, new, {}, Release.of("1.35"))
    assert new["status"]["allocation"]["devices"]["results"] == [{"device": "gpu-0"}]
    kept = {"status": {"allocation": {"devices": {"results": [dict(result)]}}}}
    drop_disabled_status_fields(CLAIMS, kept, {}, Release.of("1.36"))
    assert kept["status"]["allocation"]["devices"]["results"] == [result]


def test_the_taint_effect_none_is_valid_from_1_35() -> None:
    gated = Release.of("1.34", feature_gates={"DRADeviceTaints": True})
    errors = release_errors(SLICES, slice_(taints=[{**TAINT, "effect": "None"}]), gated)
    assert [(e.field, e.type.value[0]) for e in errors] == [
        ("spec.devices[0].taints[0].effect", "FieldValueNotSupported")
    ]
    rule = {"spec": {"taint": {**TAINT, "effect": "None"}}}
    assert release_errors(TAINT_RULES, rule, gated)
    assert release_errors(TAINT_RULES, rule, Release.of("1.35")) == []
