"""The ``gpu.nvidia.com`` DeviceClass, as NVIDIA's Helm chart installs it: every whole GPU of
the driver (``type == "gpu"``, which leaves out MIG and VFIO devices)."""

from __future__ import annotations

from typing import Any

from shared.crds.names import GPU_DEVICE_CLASS, GPU_DEVICE_TYPE, GPU_DRA_DRIVER
from shared.kube.resources import DEVICE_CLASSES

SELECTOR = (
    f"device.driver == '{GPU_DRA_DRIVER}' && "
    f"device.attributes['{GPU_DRA_DRIVER}'].type == '{GPU_DEVICE_TYPE}'"
)


def device_class_manifest() -> dict[str, Any]:
    return {
        "apiVersion": DEVICE_CLASSES.api_version,
        "kind": DEVICE_CLASSES.kind,
        "metadata": {"name": GPU_DEVICE_CLASS},
        "spec": {"selectors": [{"cel": {"expression": SELECTOR}}]},
    }
