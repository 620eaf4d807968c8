"""PynvmlNvml: the Nvml interface over pynvml (``nvidia-ml-py``).

The same code drives the real ``libnvidia-ml`` on a GPU node and the simulated library of
``sim.nvml``, which only replaces pynvml's library object. Nothing pynvml returns leaves this
module: callers get the Structs of ``shared.nvml.model``.
"""

from __future__ import annotations

import ctypes
import threading
import uuid
from collections.abc import Sequence
from typing import Any

import pynvml

from shared.nvml.calls import describe, field_value, nvml_errors, raw_field, text, translate
from shared.nvml.errors import GpuLostError, NotSupportedError, NvmlUnavailableError
from shared.nvml.events import PynvmlEventSubscription
from shared.nvml.model import (
    DEFAULT_EVENT_TYPES,
    EccErrorCounts,
    FabricInfo,
    FabricState,
    GpuIdentity,
    NvLinkStates,
    PlatformInfo,
    RemappedRows,
)

# Platform info struct versions, newest first, with the names each gives the same fields:
# Blackwell's v2 renamed the v1 fields after what they hold there.
_PLATFORM_LAYOUTS: tuple[tuple[int, str, dict[str, str]], ...] = (
    (
        2,
        "c_nvmlPlatformInfo_v2_t",
        {
            "tray_index": "trayIndex",
            "slot_number": "slotNumber",
            "host_id": "hostId",
            "chassis_serial": "chassisSerialNumber",
        },
    ),
    (
        1,
        "c_nvmlPlatformInfo_v1_t",
        {
            "tray_index": "computeSlotIndex",
            "slot_number": "chassisPhysicalSlotNumber",
            "host_id": "nodeIndex",
            "chassis_serial": "rackGuid",
        },
    ),
)


class PynvmlNvml:
    """NVML through pynvml; see :class:`shared.nvml.interface.Nvml` for the contract."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._initialized = False
        self._handles: dict[int, Any] = {}
        # Learnt once: a driver that refused the v3 struct will refuse it again.
        self._fabric_v3 = hasattr(pynvml, "c_nvmlGpuFabricInfo_v3_t")

    # -- lifetime ------------------------------------------------------------------------

    def init(self) -> None:
        with self._lock:
            if self._initialized:
                return
            try:
                pynvml.nvmlInit()
            except pynvml.NVMLError as error:
                # Whatever stops nvmlInit, nothing can be read: one answer for callers.
                raise NvmlUnavailableError(
                    f"nvmlInit: {describe(error)}", code=int(error.value)
                ) from error
            self._initialized = True
            self._handles.clear()

    def shutdown(self) -> None:
        with self._lock:
            if not self._initialized:
                return
            self._initialized = False
            self._handles.clear()
            try:
                with nvml_errors("nvmlShutdown"):
                    pynvml.nvmlShutdown()
            except NvmlUnavailableError:
                # A driver that went away holds no initialisation to release.
                pass

    # -- system --------------------------------------------------------------------------

    def driver_version(self) -> str:
        with nvml_errors("nvmlSystemGetDriverVersion"):
            return text(pynvml.nvmlSystemGetDriverVersion())

    def device_count(self) -> int:
        with nvml_errors("nvmlDeviceGetCount"):
            return int(pynvml.nvmlDeviceGetCount())

    # -- per GPU -------------------------------------------------------------------------

    def identity(self, gpu: int) -> GpuIdentity:
        handle = self._handle(gpu)
        with nvml_errors("identity", gpu=gpu):
            gpu_uuid = text(pynvml.nvmlDeviceGetUUID(handle))
            pci = pynvml.nvmlDeviceGetPciInfo_v3(handle)
            name = text(pynvml.nvmlDeviceGetName(handle))
        return GpuIdentity(index=gpu, uuid=gpu_uuid, pci_bus_id=text(pci.busId), name=name)

    def fabric_info(self, gpu: int) -> FabricInfo:
        try:
            return self._fabric_info(gpu)
        except NotSupportedError:
            # A GPU older than Hopper has no fabric query: it is on no NVLink fabric.
            return FabricInfo(
                gpu_index=gpu,
                version=2,
                state=FabricState.NOT_SUPPORTED,
                status=pynvml.NVML_SUCCESS,
                cluster_uuid=uuid.UUID(int=0),
                clique_id=0,
                health_mask=0,
            )

    def _fabric_info(self, gpu: int) -> FabricInfo:
        handle = self._handle(gpu)
        info: Any = None
        version = 2
        if self._fabric_v3:
            info = pynvml.c_nvmlGpuFabricInfo_v3_t()
            try:
                pynvml.nvmlDeviceGetGpuFabricInfoV(handle, ctypes.byref(info))
                version = 3
            except pynvml.NVMLError_ArgumentVersionMismatch:
                self._fabric_v3 = False
                info = None
            except pynvml.NVMLError as error:
                raise translate(error, what="nvmlDeviceGetGpuFabricInfoV", gpu=gpu) from error
        if info is None:
            info = pynvml.c_nvmlGpuFabricInfo_v2_t()
            with nvml_errors("nvmlDeviceGetGpuFabricInfoV", gpu=gpu):
                pynvml.nvmlDeviceGetGpuFabricInfoV(handle, ctypes.byref(info))
        return FabricInfo(
            gpu_index=gpu,
            version=version,
            state=int(info.state),
            status=int(info.status),
            cluster_uuid=uuid.UUID(bytes=bytes(info.clusterUuid)),
            clique_id=int(info.cliqueId),
            health_mask=int(info.healthMask),
            health_summary=int(info.healthSummary) if version == 3 else None,
        )

    def platform_info(self, gpu: int) -> PlatformInfo | None:
        handle = self._handle(gpu)
        for version, struct_name, names in _PLATFORM_LAYOUTS:
            struct = getattr(pynvml, struct_name, None)
            if struct is None:
                continue
            info = struct()
            try:
                pynvml.nvmlDeviceGetPlatformInfo(handle, ctypes.byref(info))
            except pynvml.NVMLError_ArgumentVersionMismatch:
                continue
            except pynvml.NVMLError as error:
                failure = translate(error, what="nvmlDeviceGetPlatformInfo", gpu=gpu)
                if isinstance(failure, NotSupportedError):
                    return None
                raise failure from error
            return PlatformInfo(
                gpu_index=gpu,
                version=version,
                tray_index=raw_field(info, names["tray_index"])[0],
                slot_number=raw_field(info, names["slot_number"])[0],
                host_id=raw_field(info, names["host_id"])[0],
                module_id=raw_field(info, "moduleId")[0],
                peer_type=raw_field(info, "peerType")[0],
                chassis_serial=_printable(raw_field(info, names["chassis_serial"])),
                ib_guid=raw_field(info, "ibGuid").hex(),
            )
        # No struct version this driver knows: the same as not reporting placement.
        return None

    def nvlink_states(self, gpu: int) -> NvLinkStates:
        handle = self._handle(gpu)
        count = self._field(handle, gpu, pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT)
        limit = count if count is not None else pynvml.NVML_NVLINK_MAX_LINKS
        active: list[bool | None] = []
        for link in range(limit):
            try:
                state = pynvml.nvmlDeviceGetNvLinkState(handle, link)
            except (pynvml.NVMLError_InvalidArgument, pynvml.NVMLError_NotSupported):
                if count is None:
                    break  # probing without a count: the first refused link is past the end
                active.append(None)
                continue
            except pynvml.NVMLError as error:
                raise translate(error, what="nvmlDeviceGetNvLinkState", gpu=gpu) from error
            active.append(state == pynvml.NVML_FEATURE_ENABLED)
        return NvLinkStates(gpu_index=gpu, active=tuple(active))

    def ecc_errors(self, gpu: int) -> EccErrorCounts:
        handle = self._handle(gpu)
        uncorrected = pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
        with nvml_errors("nvmlDeviceGetTotalEccErrors", gpu=gpu):
            volatile = pynvml.nvmlDeviceGetTotalEccErrors(
                handle, uncorrected, pynvml.NVML_VOLATILE_ECC
            )
        try:
            with nvml_errors("nvmlDeviceGetTotalEccErrors", gpu=gpu):
                aggregate: int | None = pynvml.nvmlDeviceGetTotalEccErrors(
                    handle, uncorrected, pynvml.NVML_AGGREGATE_ECC
                )
        except NotSupportedError:
            aggregate = None
        return EccErrorCounts(
            gpu_index=gpu,
            uncorrected_volatile=int(volatile),
            uncorrected_aggregate=None if aggregate is None else int(aggregate),
        )

    def remapped_rows(self, gpu: int) -> RemappedRows:
        handle = self._handle(gpu)
        with nvml_errors("nvmlDeviceGetRemappedRows", gpu=gpu):
            correctable, uncorrectable, pending, failure = pynvml.nvmlDeviceGetRemappedRows(handle)
        return RemappedRows(
            gpu_index=gpu,
            correctable=int(correctable),
            uncorrectable=int(uncorrectable),
            pending=bool(pending),
            failure=bool(failure),
        )

    def recovery_action(self, gpu: int) -> int | None:
        field_id = getattr(pynvml, "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", None)
        if field_id is None:
            return None  # a pynvml that predates the field cannot ask for it
        return self._field(self._handle(gpu), gpu, field_id)

    def is_lost(self, gpu: int) -> bool:
        try:
            with nvml_errors("nvmlDeviceGetUUID", gpu=gpu):
                pynvml.nvmlDeviceGetUUID(self._handle(gpu))
        except GpuLostError:
            return True
        return False

    def open_events(
        self, *, gpus: Sequence[int] | None = None, event_types: int = DEFAULT_EVENT_TYPES
    ) -> PynvmlEventSubscription:
        wanted = range(self.device_count()) if gpus is None else gpus
        handles: dict[int, Any] = {}
        lost: list[int] = []
        for gpu in wanted:
            try:
                handles[gpu] = self._handle(gpu)
            except GpuLostError:
                lost.append(gpu)
        return PynvmlEventSubscription.open(
            handles=handles, event_types=int(event_types), skipped=tuple(lost)
        )

    # -- helpers -------------------------------------------------------------------------

    def _handle(self, gpu: int) -> Any:
        handle = self._handles.get(gpu)
        if handle is None:
            with nvml_errors("nvmlDeviceGetHandleByIndex", gpu=gpu):
                handle = pynvml.nvmlDeviceGetHandleByIndex(gpu)
            self._handles[gpu] = handle
        return handle

    def _field(self, handle: Any, gpu: int, field_id: int, scope: int = 0) -> int | None:
        """One field value; None where the GPU does not report that field."""
        with nvml_errors("nvmlDeviceGetFieldValues", gpu=gpu):
            (entry,) = pynvml.nvmlDeviceGetFieldValues(handle, [(field_id, scope)])
        code = int(entry.nvmlReturn)
        if code == pynvml.NVML_SUCCESS:
            return field_value(entry)
        failure = translate(pynvml.NVMLError(code), what=f"field {field_id}", gpu=gpu)
        if isinstance(failure, NotSupportedError):
            return None
        raise failure


def _printable(raw: bytes) -> str:
    """A fixed-size text field: up to the first NUL, ASCII, anything else escaped."""
    return raw.split(b"\0", 1)[0].decode("ascii", errors="backslashreplace")
