"""Field values (nvmlDeviceGetFieldValues): which NVML_FI_* ids the simulation answers.

Each supported field is read from GPU state by a small function; a field not in the table
is answered per entry with NOT_SUPPORTED, as NVML does for fields a GPU lacks. Fields scoped
to an NVLink take the link index in ``scopeId``.
"""

from __future__ import annotations

from collections.abc import Callable

import pynvml

from sim.nvml.cabi import NvmlCallError
from sim.nvml.state import GpuState, NvLink

UINT = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
ULONGLONG = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG

# (value type, value); a reader raises NvmlCallError for a per-field error.
FieldReader = Callable[[GpuState, int], tuple[int, int]]


def _link(gpu: GpuState, scope: int) -> NvLink:
    if not 0 <= scope < len(gpu.links):
        raise NvmlCallError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
    return gpu.links[scope]


def _link_error_total(counter: int) -> FieldReader:
    return lambda gpu, _scope: (ULONGLONG, sum(link.errors[counter] for link in gpu.links))


def _ecc_total(error_type: int, counter_type: int) -> FieldReader:
    def read(gpu: GpuState, _scope: int) -> tuple[int, int]:
        count = gpu.ecc.count(error_type=error_type, counter_type=counter_type)
        assert count is not None  # the table only pairs known types
        return ULONGLONG, count

    return read


FIELDS: dict[int, FieldReader] = {
    pynvml.NVML_FI_DEV_ECC_CURRENT: lambda gpu, _s: (UINT, 1),
    pynvml.NVML_FI_DEV_ECC_PENDING: lambda gpu, _s: (UINT, 1),
    pynvml.NVML_FI_DEV_ECC_SBE_VOL_TOTAL: _ecc_total(
        pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_VOLATILE_ECC
    ),
    pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL: _ecc_total(
        pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC
    ),
    pynvml.NVML_FI_DEV_ECC_SBE_AGG_TOTAL: _ecc_total(
        pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_AGGREGATE_ECC
    ),
    pynvml.NVML_FI_DEV_ECC_DBE_AGG_TOTAL: _ecc_total(
        pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_AGGREGATE_ECC
    ),
    pynvml.NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL: _link_error_total(
        pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT
    ),
    pynvml.NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL: _link_error_total(
        pynvml.NVML_NVLINK_ERROR_DL_CRC_DATA
    ),
    pynvml.NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL: _link_error_total(
        pynvml.NVML_NVLINK_ERROR_DL_REPLAY
    ),
    pynvml.NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL: _link_error_total(
        pynvml.NVML_NVLINK_ERROR_DL_RECOVERY
    ),
    pynvml.NVML_FI_DEV_NVLINK_ECC_DATA_ERROR_COUNT_TOTAL: _link_error_total(
        pynvml.NVML_NVLINK_ERROR_DL_ECC_DATA
    ),
    pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT: lambda gpu, _s: (UINT, len(gpu.links)),
    pynvml.NVML_FI_DEV_NVSWITCH_CONNECTED_LINK_COUNT: lambda gpu, _s: (
        UINT,
        sum(link.active for link in gpu.links),
    ),
    pynvml.NVML_FI_DEV_NVLINK_GET_STATE: lambda gpu, scope: (
        UINT,
        pynvml.NVML_NVLINK_STATE_ACTIVE
        if _link(gpu, scope).active
        else pynvml.NVML_NVLINK_STATE_INACTIVE,
    ),
    pynvml.NVML_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_SUCCESSFUL_EVENTS: lambda gpu, scope: (
        ULONGLONG,
        _link(gpu, scope).recoveries_successful,
    ),
    pynvml.NVML_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_FAILED_EVENTS: lambda gpu, scope: (
        ULONGLONG,
        _link(gpu, scope).recoveries_failed,
    ),
    pynvml.NVML_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_EVENTS: lambda gpu, scope: (
        ULONGLONG,
        _link(gpu, scope).recoveries_successful + _link(gpu, scope).recoveries_failed,
    ),
    pynvml.NVML_FI_DEV_REMAPPED_COR: lambda gpu, _s: (UINT, gpu.remapped_rows.correctable),
    pynvml.NVML_FI_DEV_REMAPPED_UNC: lambda gpu, _s: (UINT, gpu.remapped_rows.uncorrectable),
    pynvml.NVML_FI_DEV_REMAPPED_PENDING: lambda gpu, _s: (UINT, int(gpu.remapped_rows.pending)),
    pynvml.NVML_FI_DEV_REMAPPED_FAILURE: lambda gpu, _s: (UINT, int(gpu.remapped_rows.failure)),
    pynvml.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION: lambda gpu, _s: (UINT, gpu.recovery_action),
}


def read_field(gpu: GpuState, field_id: int, scope_id: int) -> tuple[int, int, int]:
    """(nvmlReturn, value type, value) of one field entry."""
    reader = FIELDS.get(field_id)
    if reader is None:
        return pynvml.NVML_ERROR_NOT_SUPPORTED, 0, 0
    try:
        value_type, value = reader(gpu, scope_id)
    except NvmlCallError as failure:
        return failure.code, 0, 0
    return pynvml.NVML_SUCCESS, value_type, value
