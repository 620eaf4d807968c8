"""Device handles and identity: lookup by index/UUID/PCI bus id, names, PCI info, memory."""

from __future__ import annotations

import ctypes

import pynvml

from sim.nvml import cabi
from sim.nvml.node import SimulatedNvml
from sim.nvml.state import GpuState
from sim.nvml.symbols.table import NodeSymbol, Symbol

PRODUCT_NAME = "NVIDIA GB200"
# NVML packs PCI ids as (device << 16) | vendor; 10de:2941 is the GB200 GPU. The subsystem
# id is a plausible board id, not one taken from hardware.
PCI_DEVICE_ID = 0x294110DE
PCI_SUBSYSTEM_ID = 0x20D510DE
MEMORY_TOTAL_BYTES = 189_471 * 1024 * 1024  # about the 186 GiB of HBM3e of a GB200 GPU
MEMORY_RESERVED_BYTES = 512 * 1024 * 1024
COMPUTE_CAPABILITY = (10, 0)


def _reachable(gpu: GpuState) -> GpuState:
    if gpu.lost:
        raise cabi.NvmlCallError(pynvml.NVML_ERROR_GPU_IS_LOST)
    return gpu


def handle_by_index(nvml: SimulatedNvml, index: object, device: object) -> None:
    position = cabi.integer(index)
    if not 0 <= position < len(nvml.gpus):
        raise cabi.invalid_argument()
    cabi.write_pointer(device, _reachable(nvml.gpus[position]).address)


def handle_by_uuid(nvml: SimulatedNvml, uuid: object, device: object) -> None:
    wanted = cabi.c_string(uuid).decode(errors="replace")
    for gpu in nvml.gpus:
        if gpu.spec.uuid == wanted:
            cabi.write_pointer(device, _reachable(gpu).address)
            return
    raise cabi.NvmlCallError(pynvml.NVML_ERROR_NOT_FOUND)


def _bus_id_key(text: str) -> tuple[int, int, int, int] | None:
    """domain, bus, device, function of "dddddddd:bb:dd.f" or "dddd:bb:dd.f"; None if garbled."""
    try:
        domain, bus, rest = text.strip().split(":")
        device, function = rest.split(".")
        return int(domain, 16), int(bus, 16), int(device, 16), int(function, 16)
    except ValueError:
        return None


def handle_by_pci_bus_id(nvml: SimulatedNvml, bus_id: object, device: object) -> None:
    wanted = _bus_id_key(cabi.c_string(bus_id).decode(errors="replace"))
    if wanted is None:
        raise cabi.invalid_argument()
    for gpu in nvml.gpus:
        if _bus_id_key(gpu.spec.pci_bus_id) == wanted:
            cabi.write_pointer(device, _reachable(gpu).address)
            return
    raise cabi.NvmlCallError(pynvml.NVML_ERROR_NOT_FOUND)


def uuid(nvml: SimulatedNvml, device: object, buffer: object, length: object) -> None:
    cabi.write_c_string(buffer, length, nvml.live_device(device).spec.uuid)


def name(nvml: SimulatedNvml, device: object, buffer: object, length: object) -> None:
    nvml.live_device(device)
    cabi.write_c_string(buffer, length, PRODUCT_NAME)


def serial(nvml: SimulatedNvml, device: object, buffer: object, length: object) -> None:
    cabi.write_c_string(buffer, length, nvml.live_device(device).spec.serial)


def index(nvml: SimulatedNvml, device: object, result: object) -> None:
    cabi.target(result, ctypes.c_uint).value = nvml.live_device(device).spec.index


def minor_number(nvml: SimulatedNvml, device: object, result: object) -> None:
    cabi.target(result, ctypes.c_uint).value = nvml.live_device(device).spec.minor_number


def module_id(nvml: SimulatedNvml, device: object, result: object) -> None:
    cabi.target(result, ctypes.c_uint).value = nvml.live_device(device).spec.module_id


def pci_info_v3(nvml: SimulatedNvml, device: object, info: object) -> None:
    gpu = nvml.live_device(device)
    key = _bus_id_key(gpu.spec.pci_bus_id)
    assert key is not None  # topology-generated bus ids always parse
    domain, bus, slot, _function = key
    out = cabi.target(info, pynvml.nvmlPciInfo_t)
    out.busId = gpu.spec.pci_bus_id.encode()
    # The legacy 16-byte field holds the short "dddd:bb:dd.f" form.
    out.busIdLegacy = f"{domain:04X}:{bus:02X}:{slot:02X}.0".encode()
    out.domain, out.bus, out.device = domain, bus, slot
    out.pciDeviceId = PCI_DEVICE_ID
    out.pciSubSystemId = PCI_SUBSYSTEM_ID


def memory_info(nvml: SimulatedNvml, device: object, memory: object) -> None:
    nvml.live_device(device)
    out = cabi.target(memory, pynvml.c_nvmlMemory_t)
    out.total, out.used, out.free = MEMORY_TOTAL_BYTES, 0, MEMORY_TOTAL_BYTES


def memory_info_v2(nvml: SimulatedNvml, device: object, memory: object) -> None:
    nvml.live_device(device)
    if cabi.struct_version(memory) != pynvml.nvmlMemory_v2:
        raise cabi.NvmlCallError(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
    out = cabi.target(memory, pynvml.c_nvmlMemory_v2_t)
    out.total, out.reserved = MEMORY_TOTAL_BYTES, MEMORY_RESERVED_BYTES
    out.used, out.free = 0, MEMORY_TOTAL_BYTES - MEMORY_RESERVED_BYTES


def architecture(nvml: SimulatedNvml, device: object, result: object) -> None:
    nvml.live_device(device)
    cabi.target(result, ctypes.c_uint).value = pynvml.NVML_DEVICE_ARCH_BLACKWELL


def brand(nvml: SimulatedNvml, device: object, result: object) -> None:
    nvml.live_device(device)
    cabi.target(result, ctypes.c_uint).value = pynvml.NVML_BRAND_NVIDIA


def compute_capability(nvml: SimulatedNvml, device: object, major: object, minor: object) -> None:
    nvml.live_device(device)
    cabi.target(major, ctypes.c_int).value, cabi.target(minor, ctypes.c_int).value = (
        COMPUTE_CAPABILITY
    )


SYMBOLS: dict[str, Symbol] = {
    "nvmlDeviceGetHandleByIndex": NodeSymbol(handle_by_index),
    "nvmlDeviceGetHandleByIndex_v2": NodeSymbol(handle_by_index),
    "nvmlDeviceGetHandleByUUID": NodeSymbol(handle_by_uuid),
    "nvmlDeviceGetHandleByPciBusId": NodeSymbol(handle_by_pci_bus_id),
    "nvmlDeviceGetHandleByPciBusId_v2": NodeSymbol(handle_by_pci_bus_id),
    "nvmlDeviceGetUUID": NodeSymbol(uuid),
    "nvmlDeviceGetName": NodeSymbol(name),
    "nvmlDeviceGetSerial": NodeSymbol(serial),
    "nvmlDeviceGetIndex": NodeSymbol(index),
    "nvmlDeviceGetMinorNumber": NodeSymbol(minor_number),
    "nvmlDeviceGetModuleId": NodeSymbol(module_id),
    "nvmlDeviceGetPciInfo_v3": NodeSymbol(pci_info_v3),
    "nvmlDeviceGetMemoryInfo": NodeSymbol(memory_info),
    "nvmlDeviceGetMemoryInfo_v2": NodeSymbol(memory_info_v2),
    "nvmlDeviceGetArchitecture": NodeSymbol(architecture),
    "nvmlDeviceGetBrand": NodeSymbol(brand),
    "nvmlDeviceGetCudaComputeCapability": NodeSymbol(compute_capability),
}
