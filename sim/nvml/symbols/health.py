"""Health signals read by polling: NVLink state and errors, ECC, row remapping, field values."""

from __future__ import annotations

import ctypes
import time

import pynvml

from sim.nvml import cabi
from sim.nvml.fields import read_field
from sim.nvml.node import SimulatedNvml
from sim.nvml.state import GpuState, NvLink
from sim.nvml.symbols.table import NodeSymbol, Symbol


def _link(gpu: GpuState, link: object) -> NvLink:
    index = cabi.integer(link)
    if not 0 <= index < len(gpu.links):
        raise cabi.invalid_argument()
    return gpu.links[index]


def nvlink_state(nvml: SimulatedNvml, device: object, link: object, is_active: object) -> None:
    state = _link(nvml.live_device(device), link)
    enabled = pynvml.NVML_FEATURE_ENABLED if state.active else pynvml.NVML_FEATURE_DISABLED
    cabi.target(is_active, ctypes.c_uint).value = enabled


def nvlink_error_counter(
    nvml: SimulatedNvml, device: object, link: object, counter: object, value: object
) -> None:
    state = _link(nvml.live_device(device), link)
    count = state.errors.get(cabi.integer(counter))
    if count is None:
        raise cabi.invalid_argument()
    cabi.target(value, ctypes.c_ulonglong).value = count


def total_ecc_errors(
    nvml: SimulatedNvml, device: object, error_type: object, counter_type: object, count: object
) -> None:
    gpu = nvml.live_device(device)
    total = gpu.ecc.count(
        error_type=cabi.integer(error_type), counter_type=cabi.integer(counter_type)
    )
    if total is None:
        raise cabi.invalid_argument()
    cabi.target(count, ctypes.c_ulonglong).value = total


def ecc_mode(nvml: SimulatedNvml, device: object, current: object, pending: object) -> None:
    nvml.live_device(device)
    cabi.target(current, ctypes.c_uint).value = pynvml.NVML_FEATURE_ENABLED
    cabi.target(pending, ctypes.c_uint).value = pynvml.NVML_FEATURE_ENABLED


def remapped_rows(
    nvml: SimulatedNvml,
    device: object,
    correctable: object,
    uncorrectable: object,
    pending: object,
    failure: object,
) -> None:
    rows = nvml.live_device(device).remapped_rows
    cabi.target(correctable, ctypes.c_uint).value = rows.correctable
    cabi.target(uncorrectable, ctypes.c_uint).value = rows.uncorrectable
    cabi.target(pending, ctypes.c_uint).value = int(rows.pending)
    cabi.target(failure, ctypes.c_uint).value = int(rows.failure)


def page_retirement(nvml: SimulatedNvml, device: object, *_outputs: object) -> None:
    # GPUs with row remapping (Ampere and later) do not retire pages.
    nvml.live_device(device)
    raise cabi.NvmlCallError(pynvml.NVML_ERROR_NOT_SUPPORTED)


def field_values(nvml: SimulatedNvml, device: object, count: object, values: object) -> None:
    gpu = nvml.live_device(device)
    entries = cabi.integer(count)
    if entries <= 0:
        raise cabi.invalid_argument()
    array = cabi.target(values, pynvml.c_nvmlFieldValue_t * entries)
    now_us = time.time_ns() // 1000
    for entry in array:
        entry.nvmlReturn, entry.valueType, value = read_field(gpu, entry.fieldId, entry.scopeId)
        entry.timestamp, entry.latencyUsec = now_us, 0
        if entry.valueType == pynvml.NVML_VALUE_TYPE_UNSIGNED_INT:
            entry.value.uiVal = value
        else:
            entry.value.ullVal = value


SYMBOLS: dict[str, Symbol] = {
    "nvmlDeviceGetNvLinkState": NodeSymbol(nvlink_state),
    "nvmlDeviceGetNvLinkErrorCounter": NodeSymbol(nvlink_error_counter),
    "nvmlDeviceGetTotalEccErrors": NodeSymbol(total_ecc_errors),
    "nvmlDeviceGetEccMode": NodeSymbol(ecc_mode),
    "nvmlDeviceGetRemappedRows": NodeSymbol(remapped_rows),
    "nvmlDeviceGetRetiredPages": NodeSymbol(page_retirement),
    "nvmlDeviceGetRetiredPages_v2": NodeSymbol(page_retirement),
    "nvmlDeviceGetRetiredPagesPendingStatus": NodeSymbol(page_retirement),
    "nvmlDeviceGetFieldValues": NodeSymbol(field_values),
}
