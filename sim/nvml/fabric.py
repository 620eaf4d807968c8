"""The fabric health mask of nvmlGpuFabricInfo: named sub-fields packed into one uint32.

NVML packs several small enums into ``healthMask``, each at a shift with a width (the
``NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_*`` / ``_WIDTH_*`` constants). These pure helpers read
and replace one sub-field, so fault injection can say "route unhealthy" instead of a number.
"""

from __future__ import annotations

import enum

import pynvml


class HealthField(enum.Enum):
    """A sub-field of the fabric health mask; the value is (shift, width mask)."""

    DEGRADED_BW = (
        pynvml.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW,
        pynvml.NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_DEGRADED_BW,
    )
    ROUTE_RECOVERY = (
        pynvml.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_RECOVERY,
        pynvml.NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_ROUTE_RECOVERY,
    )
    ROUTE_UNHEALTHY = (
        pynvml.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_UNHEALTHY,
        pynvml.NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_ROUTE_UNHEALTHY,
    )
    ACCESS_TIMEOUT_RECOVERY = (
        pynvml.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ACCESS_TIMEOUT_RECOVERY,
        pynvml.NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_ACCESS_TIMEOUT_RECOVERY,
    )
    INCORRECT_CONFIGURATION = (
        pynvml.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_INCORRECT_CONFIGURATION,
        pynvml.NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_INCORRECT_CONFIGURATION,
    )
    PARTITION_ASSIGNED = (
        pynvml.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_PARTITION_ASSIGNED,
        pynvml.NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_PARTITION_ASSIGNED,
    )
    GFM_STATE = (
        pynvml.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_GFM_STATE,
        pynvml.NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_GFM_STATE,
    )

    @property
    def shift(self) -> int:
        return int(self.value[0])

    @property
    def width(self) -> int:
        return int(self.value[1])


def health_field(mask: int, field: HealthField) -> int:
    """The value of ``field`` inside ``mask`` (NVML's NVML_GPU_FABRIC_HEALTH_GET)."""
    return (mask >> field.shift) & field.width


def with_health_field(mask: int, field: HealthField, value: int) -> int:
    """``mask`` with ``field`` replaced by ``value``."""
    if not 0 <= value <= field.width:
        raise ValueError(f"{field.name} takes 0..{field.width}, not {value}")
    return (mask & ~(field.width << field.shift)) | (value << field.shift)


def compose_health_mask(values: dict[HealthField, int]) -> int:
    """A mask holding each given sub-field value, the others 0 (NOT_SUPPORTED)."""
    mask = 0
    for field, value in values.items():
        mask = with_health_field(mask, field, value)
    return mask


# What a healthy GPU of a partitioned, fabric-manager-connected NVL72 reports: every
# "problem" sub-field present and false, a partition assigned, the fabric manager connected.
HEALTHY_MASK = compose_health_mask(
    {
        HealthField.DEGRADED_BW: pynvml.NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_FALSE,
        HealthField.ROUTE_RECOVERY: pynvml.NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_RECOVERY_FALSE,
        HealthField.ROUTE_UNHEALTHY: pynvml.NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_FALSE,
        HealthField.ACCESS_TIMEOUT_RECOVERY: (
            pynvml.NVML_GPU_FABRIC_HEALTH_MASK_ACCESS_TIMEOUT_RECOVERY_FALSE
        ),
        HealthField.INCORRECT_CONFIGURATION: (
            pynvml.NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NONE
        ),
        HealthField.PARTITION_ASSIGNED: pynvml.NVML_GPU_FABRIC_HEALTH_MASK_PARTITION_ASSIGNED_TRUE,
        HealthField.GFM_STATE: pynvml.NVML_GPU_FABRIC_HEALTH_MASK_GFM_STATE_CONNECTED,
    }
)
