"""The release matrix: each release's DRA gates and served versions as upstream states them
(docs/kubeapi.md cites the sources), and the flags' parsing and refusals as kube-apiserver's."""

from __future__ import annotations

import pytest

from sim.kubeapi.releases import Release, ReleaseError
from sim.kubeapi.releases.apis import parse_runtime_config
from sim.kubeapi.releases.gates import GateSpec, gate_specs, parse_feature_gates

DRA = "resource.k8s.io"

# (release, gate) -> (stage, default, locked); None: the release has no such gate.
GATES: dict[tuple[int, str], tuple[str, bool, bool] | None] = {
    (34, "DRADeviceTaints"): ("ALPHA", False, False),
    (35, "DRADeviceTaints"): ("ALPHA", False, False),
    (36, "DRADeviceTaints"): ("BETA", True, False),
    (37, "DRADeviceTaints"): ("GA", True, False),
    (34, "DRADeviceTaintRules"): None,
    (35, "DRADeviceTaintRules"): ("ALPHA", False, False),
    (36, "DRADeviceTaintRules"): ("BETA", False, False),
    (37, "DRADeviceTaintRules"): ("GA", True, False),
    (35, "DRAConsumableCapacity"): ("ALPHA", False, False),
    (36, "DRAConsumableCapacity"): ("BETA", True, False),
    (35, "DRAPartitionableDevices"): ("ALPHA", False, False),
    (36, "DRAPartitionableDevices"): ("BETA", True, False),
    (35, "DRADeviceBindingConditions"): ("ALPHA", False, False),
    (36, "DRADeviceBindingConditions"): ("BETA", True, False),
    (34, "DRAExtendedResource"): ("ALPHA", False, False),
    (36, "DRAExtendedResource"): ("BETA", True, False),
    (37, "DRAExtendedResource"): ("GA", True, True),
    (34, "DynamicResourceAllocation"): ("GA", True, False),
    (35, "DynamicResourceAllocation"): ("GA", True, True),
}


@pytest.mark.parametrize(("minor", "gate"), sorted(GATES))
def test_each_release_has_the_gates_upstream_lists(minor: int, gate: str) -> None:
    expected = GATES[(minor, gate)]
    found = gate_specs(minor).get(gate)
    assert found == (None if expected is None else GateSpec(*expected))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("version", "dra_versions", "taint_rules"),
    [
        ("1.34", {"v1"}, False),
        ("1.35", {"v1"}, False),
        ("1.36", {"v1"}, False),
        ("1.37", {"v1"}, True),
    ],
)
def test_by_default_a_release_serves_dra_v1_and_taint_rules_only_from_1_37(
    version: str, dra_versions: set[str], taint_rules: bool
) -> None:
    release = Release.of(version)
    assert {v for g, v, _ in release.served if g == DRA} == dra_versions
    assert release.serves(DRA, "v1", "resourceslices")
    assert release.serves(DRA, "v1", "devicetaintrules") is taint_rules


def test_runtime_config_turns_on_the_taint_rules_beta_of_1_36() -> None:
    release = Release.of(
        "1.36",
        feature_gates={"DRADeviceTaintRules": True},
        runtime_config={"resource.k8s.io/v1beta2": True},
    )
    assert release.served_versions(DRA, "devicetaintrules") == ["v1beta2"]
    assert release.enabled("DRADeviceTaintRules")
    assert release.serves(DRA, "v1beta2", "resourceclaims")  # the whole group version


def test_runtime_config_keys_from_broad_to_specific() -> None:
    release = Release.of(
        "1.35",
        runtime_config={
            "api/beta": True,
            "resource.k8s.io/v1beta1": False,
            "resource.k8s.io/v1beta1/resourceslices": True,
            "resource.k8s.io/v1alpha3/devicetaintrules": True,
        },
    )
    assert release.serves(DRA, "v1beta2", "resourceclaims")
    assert not release.serves(DRA, "v1beta1", "resourceclaims")
    assert release.serves(DRA, "v1beta1", "resourceslices")
    assert release.served_versions(DRA, "devicetaintrules") == ["v1alpha3"]
    assert not Release.of("1.37", runtime_config={"api/all": False}).served


def test_all_alpha_turns_on_every_alpha_gate_and_a_named_gate_wins() -> None:
    release = Release.of("1.35", feature_gates={"AllAlpha": True, "DRADeviceTaints": False})
    assert release.enabled("DRAConsumableCapacity") and release.enabled("DRADeviceTaintRules")
    assert not release.enabled("DRADeviceTaints")
    assert release.enabled("DRAPrioritizedList")  # beta, untouched


@pytest.mark.parametrize(
    ("version", "gates", "runtime", "message"),
    [
        ("1.35", {"Foo": True}, {}, "unrecognized feature gate: Foo"),
        ("1.34", {"DRADeviceTaintRules": True}, {}, "unrecognized feature gate"),
        (
            "1.35",
            {"DynamicResourceAllocation": False},
            {},
            "cannot set feature gate DynamicResourceAllocation to false, feature is locked to true",
        ),
        ("1.37", {"DRAExtendedResource": False}, {}, "feature is locked to true"),
        ("1.33", {}, {}, "is not emulated"),
        ("1.35", {}, {"resource.k8s.io/v1beta2/devicetaintrules": True}, "has no such API"),
        ("1.37", {}, {"apps/v1": False}, "only resource.k8s.io versions"),
    ],
)
def test_what_kube_apiserver_refuses_at_start(
    version: str, gates: dict[str, bool], runtime: dict[str, bool], message: str
) -> None:
    with pytest.raises(ReleaseError, match=message):
        Release.of(version, feature_gates=gates, runtime_config=runtime)


def test_a_ga_gate_not_locked_may_be_turned_off() -> None:
    assert not Release.of("1.37", feature_gates={"DRADeviceTaints": False}).enabled(
        "DRADeviceTaints"
    )


def test_flag_parsing() -> None:
    assert parse_feature_gates(" A=true, B=0,,C=False ") == {"A": True, "B": False, "C": False}
    with pytest.raises(ReleaseError, match="missing bool value for A"):
        parse_feature_gates("A")
    with pytest.raises(ReleaseError, match="invalid value of A=yes"):
        parse_feature_gates("A=yes")
    assert parse_runtime_config("resource.k8s.io/v1beta2,api/alpha=false") == {
        "resource.k8s.io/v1beta2": True,
        "api/alpha": False,
    }
    with pytest.raises(ReleaseError, match="invalid value"):
        parse_runtime_config("api/beta=maybe")
