"""One simulated node's NVML: its GPUs' state, its clients' event sets, and fault injection.

A :class:`SimulatedNvml` plays the part of one node's driver and ``libnvidia-ml``. The
simulated C symbols (``sim.nvml.symbols``) run with its :attr:`~SimulatedNvml.lock` held,
as the driver serialises requests; the fault-injection methods take the same lock, so they
may be called from any thread (an asyncio test, a scenario runner) while a client thread is
blocked in ``nvmlEventSetWait_v2``. Faults change state; clients observe them only through
pynvml calls and event waits, never through this object.
"""

from __future__ import annotations

import threading
import time
import uuid

import pynvml

from sim.nvml.cabi import NvmlCallError, invalid_argument, pointer_value
from sim.nvml.fabric import HealthField, with_health_field
from sim.nvml.state import (
    EccCounts,
    EventSet,
    FabricState,
    GpuState,
    NvLink,
    PendingEvent,
    RemappedRows,
)
from sim.topology import Node

# Event types a GB200 reports through nvmlDeviceGetSupportedEventTypes in this simulation.
SUPPORTED_EVENT_TYPES = (
    pynvml.nvmlEventTypeSingleBitEccError
    | pynvml.nvmlEventTypeDoubleBitEccError
    | pynvml.nvmlEventTypePState
    | pynvml.nvmlEventTypeXidCriticalError
    | pynvml.nvmlEventTypeClock
    | pynvml.nvmlEventTypeGpuRecoveryAction
)

FABRIC_INFO_V2 = pynvml.nvmlGpuFabricInfo_v2
FABRIC_INFO_V3 = pynvml.nvmlGpuFabricInfo_v3


class SimulatedNvml:
    """The NVML library of one simulated node, with fault injection per GPU.

    Create one per node, then select it for the code that should see it with
    :func:`sim.nvml.bind` (or :func:`sim.nvml.bound_context`); pynvml calls made there are
    answered from this node's state.
    """

    def __init__(self, node: Node, *, supported_event_types: int = SUPPORTED_EVENT_TYPES) -> None:
        self.node = node
        self.supported_event_types = supported_event_types
        # Guards all state below; waiting clients sleep on it until an event or fault arrives.
        self.lock = threading.Condition()
        self._gpus = [GpuState.healthy(spec, node) for spec in node.gpus]
        self._by_address = {gpu.address: gpu for gpu in self._gpus}
        self._event_sets: dict[int, EventSet] = {}
        self._init_count = 0
        self._unavailable_code: int | None = None
        self._fabric_v3 = node.driver.fabric_info_v3

    def __repr__(self) -> str:
        return f"SimulatedNvml({self.node.name!r}, gpus={len(self._gpus)})"

    # -- read-only views -------------------------------------------------------------------

    @property
    def initialized(self) -> bool:
        """Whether some client of this node holds an nvmlInit without a matching shutdown."""
        with self.lock:
            return self._init_count > 0

    @property
    def open_event_sets(self) -> int:
        """Event sets created and not yet freed (lets tests see a client cleaned up)."""
        with self.lock:
            return len(self._event_sets)

    # -- driver side: used by sim.nvml.symbols with the lock held ----------------------------

    @property
    def gpus(self) -> list[GpuState]:
        return self._gpus

    @property
    def unavailable_code(self) -> int | None:
        """The NVML_ERROR_* every call returns while the node's NVML is unavailable."""
        return self._unavailable_code

    @property
    def init_count(self) -> int:
        return self._init_count

    @property
    def fabric_info_versions(self) -> frozenset[int]:
        """The nvmlGpuFabricInfo struct versions this node's driver accepts."""
        if self._fabric_v3:
            return frozenset({FABRIC_INFO_V2, FABRIC_INFO_V3})
        return frozenset({FABRIC_INFO_V2})

    def begin_session(self) -> None:
        self._init_count += 1

    def end_session(self) -> None:
        if self._init_count == 0:
            raise NvmlCallError(pynvml.NVML_ERROR_UNINITIALIZED)
        self._init_count -= 1
        self.lock.notify_all()

    def device(self, handle: object) -> GpuState:
        """The GPU a handle refers to; handles of other nodes are invalid here."""
        gpu = self._by_address.get(pointer_value(handle))
        if gpu is None:
            raise invalid_argument()
        return gpu

    def live_device(self, handle: object) -> GpuState:
        """The GPU a handle refers to, failing as NVML does once it fell off the bus."""
        gpu = self.device(handle)
        if gpu.lost:
            raise NvmlCallError(pynvml.NVML_ERROR_GPU_IS_LOST)
        return gpu

    def create_event_set(self) -> EventSet:
        event_set = EventSet.create()
        self._event_sets[event_set.address] = event_set
        return event_set

    def event_set(self, handle: object) -> EventSet:
        event_set = self._event_sets.get(pointer_value(handle))
        if event_set is None:
            raise invalid_argument()
        return event_set

    def free_event_set(self, event_set: EventSet) -> None:
        event_set.freed = True
        del self._event_sets[event_set.address]
        # A client still waiting on the set wakes up with an error instead of sleeping on.
        self.lock.notify_all()

    def next_event(self, event_set: EventSet, *, timeout_s: float) -> PendingEvent:
        """The oldest pending event of ``event_set``, waiting up to ``timeout_s`` for one."""
        deadline = time.monotonic() + timeout_s
        while True:
            if event_set.freed:
                raise invalid_argument()
            if self._unavailable_code is not None:
                raise NvmlCallError(self._unavailable_code)
            if self._init_count == 0:
                raise NvmlCallError(pynvml.NVML_ERROR_UNINITIALIZED)
            if event_set.pending:
                return event_set.pending.popleft()
            if any(self._gpus[index].lost for index in event_set.registrations):
                raise NvmlCallError(pynvml.NVML_ERROR_GPU_IS_LOST)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise NvmlCallError(pynvml.NVML_ERROR_TIMEOUT)
            self.lock.wait(remaining)

    def _post(self, gpu: GpuState, event_type: int, event_data: int = 0) -> None:
        event = PendingEvent(gpu_index=gpu.spec.index, event_type=event_type, event_data=event_data)
        for event_set in self._event_sets.values():
            if event_set.wants(gpu.spec.index, event_type):
                event_set.pending.append(event)
        self.lock.notify_all()

    def _gpu(self, index: int) -> GpuState:
        if not 0 <= index < len(self._gpus):
            raise IndexError(f"{self.node.name} has GPUs 0..{len(self._gpus) - 1}, not {index}")
        return self._gpus[index]

    def _link(self, gpu: int, link: int) -> NvLink:
        links = self._gpu(gpu).links
        if not 0 <= link < len(links):
            raise IndexError(f"GPU {gpu} has NVLinks 0..{len(links) - 1}, not {link}")
        return links[link]

    def _fabric_targets(self, gpu: int | None) -> list[GpuState]:
        return list(self._gpus) if gpu is None else [self._gpu(gpu)]

    # -- fault injection ---------------------------------------------------------------------

    def raise_xid(self, gpu: int, xid: int) -> None:
        """Report XID ``xid`` on GPU ``gpu`` to every event set registered for XID events."""
        if not 0 < xid < 2**32:
            raise ValueError(f"an XID is a positive 32-bit number, not {xid}")
        with self.lock:
            self._post(self._gpu(gpu), pynvml.nvmlEventTypeXidCriticalError, xid)

    def set_gpu_lost(self, gpu: int, lost: bool = True) -> None:
        """Make GPU ``gpu`` fall off the bus (calls on it fail with GPU_IS_LOST) or return."""
        with self.lock:
            self._gpu(gpu).lost = lost
            self.lock.notify_all()

    def set_nvlink_active(self, gpu: int, link: int, active: bool) -> None:
        """Bring NVLink ``link`` of GPU ``gpu`` up or down."""
        with self.lock:
            self._link(gpu, link).active = active

    def drop_nvlink(self, gpu: int, link: int) -> None:
        self.set_nvlink_active(gpu, link, False)

    def restore_nvlink(self, gpu: int, link: int) -> None:
        self.set_nvlink_active(gpu, link, True)

    def add_nvlink_errors(
        self,
        gpu: int,
        link: int,
        *,
        replay: int = 0,
        recovery: int = 0,
        crc_flit: int = 0,
        crc_data: int = 0,
        ecc_data: int = 0,
        recoveries_successful: int = 0,
        recoveries_failed: int = 0,
    ) -> None:
        """Count errors on one NVLink (visible in error counters and field values)."""
        increments = {
            pynvml.NVML_NVLINK_ERROR_DL_REPLAY: replay,
            pynvml.NVML_NVLINK_ERROR_DL_RECOVERY: recovery,
            pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT: crc_flit,
            pynvml.NVML_NVLINK_ERROR_DL_CRC_DATA: crc_data,
            pynvml.NVML_NVLINK_ERROR_DL_ECC_DATA: ecc_data,
        }
        with self.lock:
            state = self._link(gpu, link)
            for counter, amount in increments.items():
                state.errors[counter] += amount
            state.recoveries_successful += recoveries_successful
            state.recoveries_failed += recoveries_failed

    def set_fabric(
        self,
        gpu: int | None = None,
        *,
        state: int | None = None,
        status: int | None = None,
        health_mask: int | None = None,
        health_summary: int | None = None,
        cluster_uuid: str | None = None,
        clique_id: int | None = None,
    ) -> None:
        """Change what fabric info reports for GPU ``gpu`` (every GPU of the node if None)."""
        with self.lock:
            for target in self._fabric_targets(gpu):
                fabric = target.fabric
                if state is not None:
                    fabric.state = state
                if status is not None:
                    fabric.status = status
                if health_mask is not None:
                    fabric.health_mask = health_mask
                if health_summary is not None:
                    fabric.health_summary = health_summary
                if cluster_uuid is not None:
                    fabric.cluster_uuid = uuid.UUID(cluster_uuid).bytes
                if clique_id is not None:
                    fabric.clique_id = clique_id

    def set_fabric_health(self, gpu: int | None, field: HealthField, value: int) -> None:
        """Set one sub-field of the fabric health mask, e.g. ROUTE_UNHEALTHY to TRUE."""
        with self.lock:
            for target in self._fabric_targets(gpu):
                target.fabric.health_mask = with_health_field(
                    target.fabric.health_mask, field, value
                )

    def reset_fabric(self, gpu: int | None = None) -> None:
        """Back to the topology's clique, registration completed and healthy."""
        with self.lock:
            for target in self._fabric_targets(gpu):
                target.fabric = FabricState.healthy(self.node)

    def add_ecc_errors(self, gpu: int, *, corrected: int = 0, uncorrected: int = 0) -> None:
        """Count memory ECC errors; registered clients get the matching ECC events."""
        with self.lock:
            target = self._gpu(gpu)
            target.ecc.corrected_volatile += corrected
            target.ecc.corrected_aggregate += corrected
            target.ecc.uncorrected_volatile += uncorrected
            target.ecc.uncorrected_aggregate += uncorrected
            if corrected:
                self._post(target, pynvml.nvmlEventTypeSingleBitEccError)
            if uncorrected:
                self._post(target, pynvml.nvmlEventTypeDoubleBitEccError)

    def clear_ecc_errors(self, gpu: int) -> None:
        """Zero every ECC counter of GPU ``gpu`` (volatile and aggregate)."""
        with self.lock:
            target = self._gpu(gpu)
            target.ecc = EccCounts()

    def set_remapped_rows(
        self,
        gpu: int,
        *,
        correctable: int | None = None,
        uncorrectable: int | None = None,
        pending: bool | None = None,
        failure: bool | None = None,
    ) -> None:
        """Change GPU ``gpu``'s row-remapping counts and flags."""
        with self.lock:
            rows = self._gpu(gpu).remapped_rows
            if correctable is not None:
                rows.correctable = correctable
            if uncorrectable is not None:
                rows.uncorrectable = uncorrectable
            if pending is not None:
                rows.pending = pending
            if failure is not None:
                rows.failure = failure

    def clear_remapped_rows(self, gpu: int) -> None:
        with self.lock:
            self._gpu(gpu).remapped_rows = RemappedRows()

    def set_recovery_action(self, gpu: int, action: int) -> None:
        """Set the GPU recovery action field; a new action is also reported as an event."""
        with self.lock:
            target = self._gpu(gpu)
            changed = target.recovery_action != action
            target.recovery_action = action
            if changed and action != pynvml.NVML_GPU_RECOVERY_ACTION_NONE:
                self._post(target, pynvml.nvmlEventTypeGpuRecoveryAction, action)

    def set_fabric_info_v3_supported(self, supported: bool) -> None:
        """Whether this node's driver accepts nvmlGpuFabricInfo_v3 (else only v2)."""
        with self.lock:
            self._fabric_v3 = supported

    def set_unavailable(self, code: int = pynvml.NVML_ERROR_DRIVER_NOT_LOADED) -> None:
        """Make every NVML call of this node fail with ``code`` (driver gone, library missing)."""
        with self.lock:
            self._unavailable_code = code
            self.lock.notify_all()

    def set_available(self) -> None:
        with self.lock:
            self._unavailable_code = None

    def clear_faults(self) -> None:
        """Every GPU back to its healthy state and the node's NVML available again.

        Handles stay valid and registrations stay in place; pending events are kept.
        """
        with self.lock:
            self._unavailable_code = None
            for gpu in self._gpus:
                gpu.lost = False
                gpu.fabric = FabricState.healthy(self.node)
                gpu.links = [NvLink() for _ in gpu.links]
                gpu.ecc = EccCounts()
                gpu.remapped_rows = RemappedRows()
                gpu.recovery_action = pynvml.NVML_GPU_RECOVERY_ACTION_NONE
            self.lock.notify_all()
