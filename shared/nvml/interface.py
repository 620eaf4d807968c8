"""The NVML access the services own: one Protocol, implemented over pynvml by PynvmlNvml.

Every method blocks in the C library (or the simulated one), so async code calls them through
``asyncio.to_thread``; they are safe to call from several threads at once. GPUs are named by
their NVML index. Per-GPU reads raise GpuLostError once a GPU fell off the bus, and every
read raises NvmlUnavailableError while the library or driver is gone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from shared.nvml.model import (
    DEFAULT_EVENT_TYPES,
    DeviceEvent,
    EccErrorCounts,
    FabricInfo,
    GpuIdentity,
    NvLinkStates,
    PlatformInfo,
    RemappedRows,
)


class EventSubscription(Protocol):
    """An NVML event set registered for some GPUs' events.

    ``wait`` blocks (in a worker thread) until at least one event is buffered or the timeout
    passes; ``next_event`` takes buffered events without blocking. Events land in the buffer
    inside ``wait``, so a caller that stops waiting (a cancelled task) loses none of them.
    Once a registered GPU is lost, ``wait`` raises GpuLostError (after the events queued
    before the loss) on every call: NVML cannot unregister a GPU, so open a new subscription
    for the GPUs that remain.
    """

    @property
    def gpus(self) -> tuple[int, ...]:
        """The GPUs registered for at least one of the wanted event types."""
        ...

    @property
    def skipped(self) -> tuple[int, ...]:
        """GPUs asked for but not registered because they were lost when it opened."""
        ...

    def wait(self, *, timeout_s: float) -> bool:
        """Block until an event is buffered (True) or ``timeout_s`` passed (False)."""
        ...

    def next_event(self) -> DeviceEvent | None:
        """The oldest buffered event, or None; never blocks."""
        ...

    def close(self) -> None:
        """Free the event set once no wait is running; idempotent."""
        ...


class Nvml(Protocol):
    """What the services read from NVML. See the module docstring for threading and errors."""

    def init(self) -> None:
        """Initialise NVML for this object (idempotent); NvmlUnavailableError if it cannot."""
        ...

    def shutdown(self) -> None:
        """Release this object's NVML initialisation (idempotent)."""
        ...

    def driver_version(self) -> str: ...

    def device_count(self) -> int: ...

    def identity(self, gpu: int) -> GpuIdentity: ...

    def fabric_info(self, gpu: int) -> FabricInfo:
        """nvmlDeviceGetGpuFabricInfoV with the v3 struct, else the v2 struct."""
        ...

    def platform_info(self, gpu: int) -> PlatformInfo | None:
        """Tray/slot placement; None where the platform does not report it."""
        ...

    def nvlink_states(self, gpu: int) -> NvLinkStates: ...

    def ecc_errors(self, gpu: int) -> EccErrorCounts: ...

    def remapped_rows(self, gpu: int) -> RemappedRows: ...

    def recovery_action(self, gpu: int) -> int | None:
        """The GPU recovery action field (a RecoveryAction value); None where unsupported."""
        ...

    def is_lost(self, gpu: int) -> bool:
        """Whether the GPU fell off the bus."""
        ...

    def open_events(
        self, *, gpus: Sequence[int] | None = None, event_types: int = DEFAULT_EVENT_TYPES
    ) -> EventSubscription:
        """An event set for ``gpus`` (all when None), each with the types it supports."""
        ...
