"""The NVML numbers shared.nvml spells out (to stay free of ctypes) agree with pynvml."""

from __future__ import annotations

import pynvml
import pytest

from shared.nvml import (
    EventType,
    FabricHealthSummary,
    FabricState,
    HealthField,
    RecoveryAction,
    health_field,
)
from shared.nvml.fabric import FALSE, NOT_SUPPORTED, TRUE, GfmState, IncorrectConfiguration
from sim.nvml import HEALTHY_MASK, compose_health_mask
from sim.nvml import HealthField as SimHealthField


@pytest.mark.parametrize(
    ("ours", "prefix"),
    [
        (FabricState, "NVML_GPU_FABRIC_STATE_"),
        (FabricHealthSummary, "NVML_GPU_FABRIC_HEALTH_SUMMARY_"),
        (RecoveryAction, "NVML_GPU_RECOVERY_ACTION_"),
        (GfmState, "NVML_GPU_FABRIC_HEALTH_MASK_GFM_STATE_"),
        (IncorrectConfiguration, "NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_"),
    ],
)
def test_enum_values_match_pynvml(ours: type, prefix: str) -> None:
    for member in ours:  # type: ignore[attr-defined]
        assert member.value == getattr(pynvml, prefix + member.name), member


def test_yes_no_values_match_pynvml() -> None:
    assert (NOT_SUPPORTED, TRUE, FALSE) == (
        pynvml.NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_NOT_SUPPORTED,
        pynvml.NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE,
        pynvml.NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_FALSE,
    )


def test_health_fields_match_pynvml_shifts_and_widths() -> None:
    for field in HealthField:
        assert field.shift == getattr(pynvml, f"NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_{field.name}")
        assert field.width == getattr(pynvml, f"NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_{field.name}")


def test_every_sub_field_decodes_like_the_simulator_encodes() -> None:
    for field in HealthField:
        for value in range(field.width + 1):
            mask = compose_health_mask({SimHealthField[field.name]: value})
            assert health_field(mask, field) == value
    assert health_field(HEALTHY_MASK, HealthField.GFM_STATE) == GfmState.CONNECTED


def test_event_types_match_pynvml() -> None:
    assert pynvml.nvmlEventTypeXidCriticalError == EventType.XID_CRITICAL_ERROR
    assert pynvml.nvmlEventTypeDoubleBitEccError == EventType.DOUBLE_BIT_ECC
    assert pynvml.nvmlEventTypeSingleBitEccError == EventType.SINGLE_BIT_ECC
    assert pynvml.nvmlEventTypeGpuRecoveryAction == EventType.GPU_RECOVERY_ACTION
