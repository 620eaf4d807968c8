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
