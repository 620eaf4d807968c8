"""What the NVML interface returns: immutable Structs and the enums that name NVML's values.

The numeric values are NVML's own (``nvml.h``); ``tests/integration/nvml`` checks them against
pynvml, so that these modules stay free of ctypes and usable from pure code.
"""

from __future__ import annotations

import enum
import uuid

import msgspec

NVML_SUCCESS = 0


class FabricState(enum.IntEnum):
    """Where a GPU is in registering with the NVLink fabric (NVML_GPU_FABRIC_STATE_*)."""

    NOT_SUPPORTED = 0
    NOT_STARTED = 1
    IN_PROGRESS = 2
    COMPLETED = 3


class FabricHealthSummary(enum.IntEnum):
    """The fabric health summary of the v3 struct (NVML_GPU_FABRIC_HEALTH_SUMMARY_*)."""

    NOT_SUPPORTED = 0
    HEALTHY = 1
    UNHEALTHY = 2
    LIMITED_CAPACITY = 3


class RecoveryAction(enum.IntEnum):
    """What NVML says a GPU needs after an error (NVML_GPU_RECOVERY_ACTION_*)."""

    NONE = 0
    GPU_RESET = 1
    NODE_REBOOT = 2
    DRAIN_P2P = 3
    DRAIN_AND_RESET = 4
    RECOVER_IMEX_DOMAIN = 5
    BUS_RESET = 6
    SYSTEM_REBOOT = 7


class EventType(enum.IntFlag):
    """Event types a subscription can register for (nvmlEventType*)."""

    SINGLE_BIT_ECC = 0x0001
    DOUBLE_BIT_ECC = 0x0002
    XID_CRITICAL_ERROR = 0x0008
    GPU_RECOVERY_ACTION = 0x8000


# What the health monitor listens to. Types a GPU does not support are left out per GPU,
# because NVML refuses a whole registration that names one unsupported type.
DEFAULT_EVENT_TYPES = (
    EventType.XID_CRITICAL_ERROR | EventType.DOUBLE_BIT_ECC | EventType.GPU_RECOVERY_ACTION
)


class EventKind(enum.StrEnum):
    XID = "xid"
    DOUBLE_BIT_ECC = "double_bit_ecc"
    SINGLE_BIT_ECC = "single_bit_ecc"
    RECOVERY_ACTION = "recovery_action"
    OTHER = "other"


class GpuIdentity(msgspec.Struct, frozen=True, kw_only=True):
    index: int
    uuid: str  # "GPU-…"
    pci_bus_id: str  # "00000008:01:00.0"
    name: str


class FabricInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One GPU's nvmlDeviceGetGpuFabricInfoV answer."""

    gpu_index: int
    version: int  # 3 or 2: the nvmlGpuFabricInfo struct version the driver accepted
    state: int  # FabricState; kept as a number so an unknown future value still decodes
    status: int  # an NVML return code; meaningful once state is COMPLETED
    cluster_uuid: uuid.UUID
    clique_id: int
    health_mask: int
    health_summary: int | None = None  # FabricHealthSummary; None from a v2 struct

    @property
    def registered(self) -> bool:
        """Registration finished and succeeded: cluster UUID and clique id are valid."""
        return self.state == FabricState.COMPLETED and self.status == NVML_SUCCESS


class PlatformInfo(msgspec.Struct, frozen=True, kw_only=True):
    """Where a GPU sits in its rack (nvmlDeviceGetPlatformInfo), where the platform tells."""

    gpu_index: int
    version: int  # 2 (Blackwell field names) or 1
    tray_index: int  # v1: computeSlotIndex
    slot_number: int  # v1: chassisPhysicalSlotNumber
    host_id: int  # v1: nodeIndex
    module_id: int
    peer_type: int
    chassis_serial: str  # v1: rackGuid
    ib_guid: str  # the raw 16 bytes in hex


class NvLinkStates(msgspec.Struct, frozen=True, kw_only=True):
    """Per NVLink of one GPU: True up, False down, None when NVML cannot tell."""

    gpu_index: int
    active: tuple[bool | None, ...]

    @property
    def down(self) -> tuple[int, ...]:
        return tuple(link for link, up in enumerate(self.active) if up is False)


class EccErrorCounts(msgspec.Struct, frozen=True, kw_only=True):
    """Uncorrected memory ECC error totals of one GPU."""

    gpu_index: int
    uncorrected_volatile: int  # since the driver loaded
    uncorrected_aggregate: int | None  # over the GPU's life; None where not kept


class RemappedRows(msgspec.Struct, frozen=True, kw_only=True):
    gpu_index: int
    correctable: int
    uncorrectable: int
    pending: bool  # a remap waits for the next GPU reset
    failure: bool  # a row could not be remapped


class DeviceEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One event delivered by nvmlEventSetWait_v2."""

    gpu_index: int | None  # None if the event named a GPU this process does not know
    kind: EventKind
    event_type: int
    data: int  # the XID for XID events, the recovery action for recovery-action events

    @property
    def xid(self) -> int | None:
        return self.data if self.kind is EventKind.XID else None
