"""Which DeviceClasses mean that NVIDIA's DRA driver for ComputeDomains is installed."""

from __future__ import annotations

import pytest

from shared.crds.coexistence import NVIDIA_DEVICE_CLASSES, nvidia_installation
from shared.crds.names import CHANNEL_DEVICE_CLASS, GPU_DEVICE_CLASS


def test_cdo_and_the_gpu_driver_alone_are_no_reason_to_stop() -> None:
    # cdo's own channel class, and the GPU DRA driver's class that cdo works beside.
    assert nvidia_installation([CHANNEL_DEVICE_CLASS, GPU_DEVICE_CLASS, "mig.nvidia.com"]) is None
    assert nvidia_installation([]) is None


@pytest.mark.parametrize("name", NVIDIA_DEVICE_CLASSES)
def test_either_compute_domain_class_is_reason_to_stop(name: str) -> None:
    reason = nvidia_installation([GPU_DEVICE_CLASS, name])
    assert reason is not None
    assert reason.startswith(
        f"NVIDIA's DRA driver for ComputeDomains is installed (DeviceClass {name}): "
    )
    assert "computedomains.resource.nvidia.com" in reason and "docs/migrating.md" in reason


def test_both_are_named_in_order() -> None:
    reason = nvidia_installation(reversed(NVIDIA_DEVICE_CLASSES))
    assert reason is not None and f"(DeviceClass {', '.join(NVIDIA_DEVICE_CLASSES)})" in reason
