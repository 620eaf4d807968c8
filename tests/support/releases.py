"""A Kubernetes release for a test: the emulator's settings and what the simulated components
do at that release, from one description."""

from __future__ import annotations

from typing import Any

from sim.kubeapi import ServerConfig
from sim.release import DeviceTaintSupport


def at_release(
    version: str,
    *,
    feature_gates: dict[str, bool] | None = None,
    runtime_config: dict[str, bool] | None = None,
    **config: Any,
) -> tuple[ServerConfig, DeviceTaintSupport]:
    """The emulator's settings at ``version`` (``config`` adds others) and the device taint
    handling of the scheduler, controllers and drivers at it."""
    settings = ServerConfig(
        kubernetes_version=version,
        feature_gates=feature_gates or {},
        runtime_config=runtime_config or {},
        **config,
    )
    return settings, DeviceTaintSupport.of(settings.release())


RULES_OPT_IN: dict[str, dict[str, dict[str, bool]]] = {
    "1.34": {
        "feature_gates": {"DRADeviceTaints": True},
        "runtime_config": {"resource.k8s.io/v1alpha3": True},
    },
    "1.35": {
        "feature_gates": {"DRADeviceTaints": True, "DRADeviceTaintRules": True},
        "runtime_config": {"resource.k8s.io/v1alpha3": True},
    },
    "1.36": {
        "feature_gates": {"DRADeviceTaintRules": True},
        "runtime_config": {"resource.k8s.io/v1beta2": True},
    },
}
"""What a platform team sets on a release before 1.37 to have DeviceTaintRules served and used
(the table in docs/kubeapi.md)."""


def rules_opted_in(version: str) -> tuple[ServerConfig, DeviceTaintSupport]:
    """:func:`at_release` with DeviceTaintRules turned on as :data:`RULES_OPT_IN` says."""
    return at_release(version, **RULES_OPT_IN[version])
