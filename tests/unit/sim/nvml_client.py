"""NVML reads written the way a service writes them: pynvml only, nothing from sim.

The tests run this against the simulated library; the same functions run unchanged against
the real libnvidia-ml on a GPU node.
"""

from __future__ import annotations

import ctypes
import uuid
from dataclasses import dataclass
from typing import Any

import pynvml


@dataclass(frozen=True)
class FabricReading:
    clique: str  # "<clusterUuid>.<cliqueId>"
    state: int
    status: int
    health_mask: int
    health_summary: int | None  # None when only the v2 struct is available
    version: int


def read_fabric(handle: Any) -> FabricReading:
    """Fabric info through the newest struct the driver accepts (v3, else v2)."""
    info: Any = pynvml.c_nvmlGpuFabricInfo_v3_t()
    try:
        pynvml.nvmlDeviceGetGpuFabricInfoV(handle, ctypes.byref(info))
    except pynvml.NVMLError_ArgumentVersionMismatch:
        info = pynvml.c_nvmlGpuFabricInfo_v2_t()
        pynvml.nvmlDeviceGetGpuFabricInfoV(handle, ctypes.byref(info))
    v3 = info.version == pynvml.nvmlGpuFabricInfo_v3
    return FabricReading(
        clique=f"{uuid.UUID(bytes=bytes(info.clusterUuid))}.{info.cliqueId}",
        state=info.state,
        status=info.status,
        health_mask=info.healthMask,
        health_summary=info.healthSummary if v3 else None,
        version=info.version,
    )


def read_tray_index(handle: Any) -> int:
    info = pynvml.c_nvmlPlatformInfo_v2_t()
    pynvml.nvmlDeviceGetPlatformInfo(handle, ctypes.byref(info))
    # pynvml hands c_char fields back as one-character strings.
    return ord(info.trayIndex)


def gpu_uuids() -> list[str]:
    return [
        pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(index))
        for index in range(pynvml.nvmlDeviceGetCount())
    ]


class XidWatcher:
    """An event set registered for XID events on the given GPUs, as a health monitor keeps."""

    def __init__(self, handles: list[Any]) -> None:
        self._event_set = pynvml.nvmlEventSetCreate()
        for handle in handles:
            pynvml.nvmlDeviceRegisterEvents(
                handle, pynvml.nvmlEventTypeXidCriticalError, self._event_set
            )

    def next(self, *, timeout_ms: int) -> tuple[int, str]:
        """The next XID and the UUID of its GPU; NVMLError_Timeout when none came in time."""
        data = pynvml.nvmlEventSetWait_v2(self._event_set, timeout_ms)
        return int(data.eventData), pynvml.nvmlDeviceGetUUID(data.device)

    def close(self) -> None:
        pynvml.nvmlEventSetFree(self._event_set)
