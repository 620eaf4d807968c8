"""Library lifetime and system queries: nvmlInit*, nvmlShutdown, versions, device count."""

from __future__ import annotations

import ctypes

import pynvml

from sim.nvml import cabi
from sim.nvml.node import SimulatedNvml
from sim.nvml.symbols.table import NodeSymbol, PlainSymbol, Symbol


def init_with_flags(nvml: SimulatedNvml, flags: object) -> None:
    # Flags only relax what NVML requires of present GPUs; every simulated GPU is present.
    cabi.integer(flags)
    nvml.begin_session()


def init(nvml: SimulatedNvml) -> None:
    nvml.begin_session()


def shutdown(nvml: SimulatedNvml) -> None:
    nvml.end_session()


# Descriptions for the codes pynvml has no text for (it asks the library for those).
_DESCRIPTIONS = {
    pynvml.NVML_ERROR_IN_USE: "In use by another client",
    pynvml.NVML_ERROR_NO_DATA: "No data",
    pynvml.NVML_ERROR_VGPU_ECC_NOT_SUPPORTED: "vGPU ECC not supported",
    pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES: "Insufficient resources",
    pynvml.NVML_ERROR_FREQ_NOT_SUPPORTED: "Frequency not supported",
    pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH: "Argument version mismatch",
    pynvml.NVML_ERROR_DEPRECATED: "Deprecated",
    pynvml.NVML_ERROR_NOT_READY: "Not ready",
    pynvml.NVML_ERROR_GPU_NOT_FOUND: "GPU not found",
    pynvml.NVML_ERROR_INVALID_STATE: "Invalid state",
    pynvml.NVML_ERROR_RESET_TYPE_NOT_SUPPORTED: "Reset type not supported",
}


def error_string(result: object) -> bytes:
    code = cabi.integer(result)
    known: dict[int, str] = {**pynvml.NVMLError._errcode_to_string, **_DESCRIPTIONS}
    return known.get(code, "Unknown Error").encode()


def driver_version(nvml: SimulatedNvml, buffer: object, length: object) -> None:
    cabi.write_c_string(buffer, length, nvml.node.driver.version)


def nvml_version(nvml: SimulatedNvml, buffer: object, length: object) -> None:
    # NVML prefixes the driver version with the CUDA major version, e.g. "12.570.133.20".
    cuda_major = nvml.node.driver.cuda_version // 1000
    cabi.write_c_string(buffer, length, f"{cuda_major}.{nvml.node.driver.version}")


def cuda_driver_version(nvml: SimulatedNvml, version: object) -> None:
    cabi.target(version, ctypes.c_int).value = nvml.node.driver.cuda_version


def device_count(nvml: SimulatedNvml, count: object) -> None:
    # Lost GPUs still count: they were enumerated when the driver loaded.
    cabi.target(count, ctypes.c_uint).value = len(nvml.gpus)


SYMBOLS: dict[str, Symbol] = {
    "nvmlInit": NodeSymbol(init, requires_init=False),
    "nvmlInit_v2": NodeSymbol(init, requires_init=False),
    "nvmlInitWithFlags": NodeSymbol(init_with_flags, requires_init=False),
    "nvmlShutdown": NodeSymbol(shutdown, requires_init=False),
    "nvmlErrorString": PlainSymbol(error_string),
    "nvmlSystemGetDriverVersion": NodeSymbol(driver_version),
    "nvmlSystemGetNVMLVersion": NodeSymbol(nvml_version),
    "nvmlSystemGetCudaDriverVersion": NodeSymbol(cuda_driver_version),
    "nvmlSystemGetCudaDriverVersion_v2": NodeSymbol(cuda_driver_version),
    "nvmlDeviceGetCount": NodeSymbol(device_count),
    "nvmlDeviceGetCount_v2": NodeSymbol(device_count),
}
