"""NVLink fabric and platform placement: nvmlDeviceGetGpuFabricInfo*, nvmlDeviceGetPlatformInfo.

Versioned structs follow NVML's rule: the caller sets ``version`` (struct size | version
<< 24) and a driver that does not know that version answers ARGUMENT_VERSION_MISMATCH,
which is what lets a client fall back from v3 to v2 on an older driver.
"""

from __future__ import annotations

import ctypes
from typing import Any

import pynvml

from sim.nvml import cabi
from sim.nvml.node import FABRIC_INFO_V2, FABRIC_INFO_V3, SimulatedNvml
from sim.nvml.state import FabricState, GpuState
from sim.nvml.symbols.table import NodeSymbol, Symbol

_FABRIC_STRUCTS: dict[int, Any] = {
    FABRIC_INFO_V2: pynvml.c_nvmlGpuFabricInfo_v2_t,
    FABRIC_INFO_V3: pynvml.c_nvmlGpuFabricInfo_v3_t,
}
_PLATFORM_STRUCTS: dict[int, Any] = {
    pynvml.nvmlPlatformInfo_v1: pynvml.c_nvmlPlatformInfo_v1_t,
    pynvml.nvmlPlatformInfo_v2: pynvml.c_nvmlPlatformInfo_v2_t,
}

# Platform fields NVML documents without publishing their encodings; fixed values here.
_HOST_ID = 1  # a GB200 tray is one host per slot
_PEER_TYPE_SWITCH = 1  # NVLink peers are switches on an NVL72


def _fabric_fields(fabric: FabricState) -> tuple[bytes, int]:
    """clusterUuid and cliqueId as reported: zero until registration has completed."""
    if fabric.state != pynvml.NVML_GPU_FABRIC_STATE_COMPLETED:
        return bytes(pynvml.NVML_GPU_FABRIC_UUID_LEN), 0
    return fabric.cluster_uuid, fabric.clique_id


def _fill_fabric(out: Any, gpu: GpuState) -> None:
    cluster_uuid, clique_id = _fabric_fields(gpu.fabric)
    ctypes.memmove(ctypes.addressof(out.clusterUuid), cluster_uuid, len(cluster_uuid))
    out.status = gpu.fabric.status
    out.cliqueId = clique_id
    out.state = gpu.fabric.state


def fabric_info_legacy(nvml: SimulatedNvml, device: object, info: object) -> None:
    gpu = nvml.live_device(device)
    _fill_fabric(cabi.target(info, pynvml.c_nvmlGpuFabricInfo_t), gpu)


def fabric_info_versioned(nvml: SimulatedNvml, device: object, info: object) -> None:
    gpu = nvml.live_device(device)
    version = cabi.struct_version(info)
    if version not in nvml.fabric_info_versions:
        raise cabi.NvmlCallError(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
    out = cabi.target(info, _FABRIC_STRUCTS[version])
    _fill_fabric(out, gpu)
    out.healthMask = gpu.fabric.health_mask
    if version == FABRIC_INFO_V3:
        out.healthSummary = gpu.fabric.health_summary


def platform_info(nvml: SimulatedNvml, device: object, info: object) -> None:
    gpu = nvml.live_device(device)
    version = cabi.struct_version(info)
    struct = _PLATFORM_STRUCTS.get(version)
    if struct is None:
        raise cabi.NvmlCallError(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
    node = nvml.node
    if not node.nvlink:
        raise cabi.NvmlCallError(pynvml.NVML_ERROR_NOT_SUPPORTED)  # no NVLink tray platform
    out = cabi.target(info, struct)
    # v1 and v2 share one layout; v2 renamed the fields (rackGuid -> chassisSerialNumber,
    # computeSlotIndex -> trayIndex ...) to what Blackwell reports in them.
    if version == pynvml.nvmlPlatformInfo_v2:
        guid_field, serial_field = out.__class__.ibGuid, out.__class__.chassisSerialNumber
        out.slotNumber = bytes([node.slot_number])
        out.trayIndex = bytes([node.tray_index])
        out.hostId = bytes([_HOST_ID])
    else:
        guid_field, serial_field = out.__class__.ibGuid, out.__class__.rackGuid
        out.chassisPhysicalSlotNumber = bytes([node.slot_number])
        out.computeSlotIndex = bytes([node.tray_index])
        out.nodeIndex = bytes([_HOST_ID])
    out.peerType = bytes([_PEER_TYPE_SWITCH])
    out.moduleId = bytes([gpu.spec.module_id])
    base = ctypes.addressof(out)
    _write_bytes(base + guid_field.offset, guid_field.size, gpu.spec.ib_guid)
    _write_bytes(base + serial_field.offset, serial_field.size, node.chassis_serial.encode())


def _write_bytes(address: int, size: int, data: bytes) -> None:
    """A fixed-size byte field, zero-padded (these fields hold raw bytes, not C strings)."""
    ctypes.memmove(address, data[:size].ljust(size, b"\0"), size)


SYMBOLS: dict[str, Symbol] = {
    "nvmlDeviceGetGpuFabricInfo": NodeSymbol(fabric_info_legacy),
    "nvmlDeviceGetGpuFabricInfoV": NodeSymbol(fabric_info_versioned),
    "nvmlDeviceGetPlatformInfo": NodeSymbol(platform_info),
}
