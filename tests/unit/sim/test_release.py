"""What the simulated components do with device taints at each release: honour them only
while DRADeviceTaints is on, and read DeviceTaintRules only where served and gated on, at the
newest version served."""

from __future__ import annotations

import pytest

from sim.kubeapi.releases import Release
from sim.release import DeviceTaintSupport
from tests.support.releases import RULES_OPT_IN


@pytest.mark.parametrize(
    ("release", "taints", "rules_version", "rule_status"),
    [
        pytest.param(Release.of("1.34"), False, None, False, id="1.34"),
        pytest.param(
            Release.of("1.34", **RULES_OPT_IN["1.34"]), True, "v1alpha3", False, id="1.34+"
        ),
        pytest.param(Release.of("1.35"), False, None, False, id="1.35"),
        pytest.param(
            Release.of("1.35", feature_gates={"DRADeviceTaints": True}),
            True,
            None,
            False,
            id="1.35+taints (rules not served)",
        ),
        pytest.param(
            Release.of("1.35", **RULES_OPT_IN["1.35"]), True, "v1alpha3", True, id="1.35+"
        ),
        pytest.param(Release.of("1.36"), True, None, False, id="1.36"),
        pytest.param(
            Release.of("1.36", runtime_config={"resource.k8s.io/v1beta2": True}),
            True,
            None,
            False,
            id="1.36+served, gate off",
        ),
        pytest.param(
            Release.of(
                "1.36",
                feature_gates={"DRADeviceTaintRules": True},
                runtime_config={"api/beta": True, "api/alpha": True},
            ),
            True,
            "v1beta2",
            True,
            id="1.36+beta",
        ),
        pytest.param(Release.of("1.37"), True, "v1", True, id="1.37"),
        pytest.param(
            Release.of("1.37", feature_gates={"DRADeviceTaintRules": False}),
            True,
            None,
            False,
            id="1.37-rules",
        ),
    ],
)
def test_device_taint_support_follows_the_release(
    release: Release, taints: bool, rules_version: str | None, rule_status: bool
) -> None:
    support = DeviceTaintSupport.of(release)
    assert support.taints is taints
    assert (support.rules.version if support.rules else None) == rules_version
    assert support.rule_status is rule_status


def test_the_defaults_are_the_newest_release() -> None:
    assert DeviceTaintSupport() == DeviceTaintSupport.of(Release.of())
