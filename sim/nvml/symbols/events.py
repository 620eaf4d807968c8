"""Event sets: create, register a GPU's event types, wait (blocking, with timeout), free."""

from __future__ import annotations

import ctypes

import pynvml

from sim.nvml import cabi
from sim.nvml.node import SimulatedNvml
from sim.nvml.state import NO_INSTANCE
from sim.nvml.symbols.table import NodeSymbol, Symbol


def create(nvml: SimulatedNvml, event_set: object) -> None:
    cabi.write_pointer(event_set, nvml.create_event_set().address)


def supported_types(nvml: SimulatedNvml, device: object, event_types: object) -> None:
    nvml.live_device(device)
    cabi.target(event_types, ctypes.c_ulonglong).value = nvml.supported_event_types


def register(nvml: SimulatedNvml, device: object, event_types: object, event_set: object) -> None:
    gpu = nvml.live_device(device)
    wanted = cabi.integer(event_types)
    target = nvml.event_set(event_set)
    if wanted & ~nvml.supported_event_types:
        # NVML refuses the whole request when any requested type is not supported.
        raise cabi.NvmlCallError(pynvml.NVML_ERROR_NOT_SUPPORTED)
    index = gpu.spec.index
    target.registrations[index] = target.registrations.get(index, 0) | wanted


def wait(nvml: SimulatedNvml, event_set: object, data: object, timeout_ms: object) -> None:
    source = nvml.event_set(event_set)
    out = cabi.target(data, pynvml.c_nvmlEventData_t)
    event = nvml.next_event(source, timeout_s=cabi.integer(timeout_ms) / 1000)
    out.device = ctypes.cast(nvml.gpus[event.gpu_index].address, pynvml.c_nvmlDevice_t)
    out.eventType = event.event_type
    out.eventData = event.event_data
    out.gpuInstanceId = NO_INSTANCE
    out.computeInstanceId = NO_INSTANCE


def free(nvml: SimulatedNvml, event_set: object) -> None:
    nvml.free_event_set(nvml.event_set(event_set))


SYMBOLS: dict[str, Symbol] = {
    "nvmlEventSetCreate": NodeSymbol(create),
    "nvmlDeviceGetSupportedEventTypes": NodeSymbol(supported_types),
    "nvmlDeviceRegisterEvents": NodeSymbol(register),
    "nvmlEventSetWait_v2": NodeSymbol(wait),
    "nvmlEventSetFree": NodeSymbol(free),
}
