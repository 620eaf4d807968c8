"""Mutable per-GPU state of a simulated node and the event sets its NVML clients created.

Plain records: :class:`sim.nvml.node.SimulatedNvml` owns them and guards every read and
write with the node's lock, so nothing here locks.
"""

from __future__ import annotations

import ctypes
from collections import deque
from dataclasses import dataclass, field

import pynvml

from sim.nvml.fabric import HEALTHY_MASK
from sim.topology import Gpu, Node

# A Blackwell GPU has 18 NVLink 5 links, all of them to the rack's NVLink switches.
NVLINKS_PER_GPU = 18

# Bounded like the driver's event buffer, so a client that never waits cannot grow memory
# without limit; the oldest events go first.
EVENT_QUEUE_LIMIT = 4096

# nvmlEventData_t reports these for a whole (non-MIG) GPU.
NO_INSTANCE = 0xFFFF_FFFF


def _opaque_memory() -> tuple[ctypes.Array[ctypes.c_char], int]:
    """A byte of real memory whose address serves as an opaque handle.

    Handles must be pointers pynvml can hold and pass back; owning the memory keeps the
    address unique for as long as the handle's owner lives.
    """
    memory = ctypes.create_string_buffer(1)
    return memory, ctypes.addressof(memory)


@dataclass
class FabricState:
    """What nvmlDeviceGetGpuFabricInfoV reports for one GPU."""

    cluster_uuid: bytes
    clique_id: int
    state: int = pynvml.NVML_GPU_FABRIC_STATE_COMPLETED
    status: int = pynvml.NVML_SUCCESS
    health_mask: int = HEALTHY_MASK
    health_summary: int = pynvml.NVML_GPU_FABRIC_HEALTH_SUMMARY_HEALTHY

    @classmethod
    def healthy(cls, node: Node) -> FabricState:
        if not node.nvlink:
            # What a GPU on no NVLink fabric reports (an H100 without NVSwitch fabric).
            return cls(
                cluster_uuid=bytes(pynvml.NVML_GPU_FABRIC_UUID_LEN),
                clique_id=0,
                state=pynvml.NVML_GPU_FABRIC_STATE_NOT_SUPPORTED,
                health_mask=0,
                health_summary=pynvml.NVML_GPU_FABRIC_HEALTH_SUMMARY_NOT_SUPPORTED,
            )
        return cls(cluster_uuid=node.cluster_uuid_bytes, clique_id=node.clique_id)


@dataclass
class NvLink:
    """One NVLink of a GPU: whether it is up and its error counters."""

    active: bool = True
    # Keyed by NVML_NVLINK_ERROR_DL_* (replay, recovery, CRC flit, CRC data, ECC data).
    errors: dict[int, int] = field(
        default_factory=lambda: dict.fromkeys(range(pynvml.NVML_NVLINK_ERROR_COUNT), 0)
    )
    recoveries_successful: int = 0
    recoveries_failed: int = 0


@dataclass
class EccCounts:
    """Total ECC error counts by error type (corrected/uncorrected) and counter lifetime."""

    corrected_volatile: int = 0
    corrected_aggregate: int = 0
    uncorrected_volatile: int = 0
    uncorrected_aggregate: int = 0

    def count(self, *, error_type: int, counter_type: int) -> int | None:
        """The count NVML would report, None for an unknown type."""
        counts = {
            (pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_VOLATILE_ECC): (
                self.corrected_volatile
            ),
            (pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_AGGREGATE_ECC): (
                self.corrected_aggregate
            ),
            (pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC): (
                self.uncorrected_volatile
            ),
            (pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_AGGREGATE_ECC): (
                self.uncorrected_aggregate
            ),
        }
        return counts.get((error_type, counter_type))


@dataclass
class RemappedRows:
    """Row remapping (HBM spare rows), as nvmlDeviceGetRemappedRows reports it."""

    correctable: int = 0
    uncorrectable: int = 0
    pending: bool = False
    failure: bool = False


@dataclass
class GpuState:
    """Everything the simulated driver knows about one GPU."""

    spec: Gpu
    fabric: FabricState
    memory: ctypes.Array[ctypes.c_char]
    address: int  # the nvmlDevice_t handle value
    lost: bool = False
    links: list[NvLink] = field(default_factory=lambda: [NvLink() for _ in range(NVLINKS_PER_GPU)])
    ecc: EccCounts = field(default_factory=EccCounts)
    remapped_rows: RemappedRows = field(default_factory=RemappedRows)
    recovery_action: int = pynvml.NVML_GPU_RECOVERY_ACTION_NONE

    @classmethod
    def healthy(cls, spec: Gpu, node: Node) -> GpuState:
        memory, address = _opaque_memory()
        return cls(spec=spec, fabric=FabricState.healthy(node), memory=memory, address=address)


@dataclass(frozen=True)
class PendingEvent:
    """An event queued for delivery by nvmlEventSetWait."""

    gpu_index: int
    event_type: int
    event_data: int


@dataclass
class EventSet:
    """An nvmlEventSet_t: which events of which GPUs it wants, and those not yet delivered."""

    memory: ctypes.Array[ctypes.c_char]
    address: int  # the nvmlEventSet_t handle value
    registrations: dict[int, int] = field(default_factory=dict)  # GPU index -> event mask
    pending: deque[PendingEvent] = field(default_factory=lambda: deque(maxlen=EVENT_QUEUE_LIMIT))
    freed: bool = False

    @classmethod
    def create(cls) -> EventSet:
        memory, address = _opaque_memory()
        return cls(memory=memory, address=address)

    def wants(self, gpu_index: int, event_type: int) -> bool:
        return bool(self.registrations.get(gpu_index, 0) & event_type)
