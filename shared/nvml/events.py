"""Event waiting over nvmlEventSetWait_v2, and the async loop that drives it from a thread.

NVML delivers XIDs and similar events through an event set a client waits on, blocking.
:class:`PynvmlEventSubscription` waits with a short timeout inside ``asyncio.to_thread``, so
the loop stays responsive and stopping is prompt: a cancelled consumer leaves at most one
wait running, which returns within the timeout. Events a wait receives are buffered in the
subscription, not returned through the thread, so cancelling a consumer loses none.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from typing import Any

import pynvml

from shared.nvml.calls import nvml_errors, pointer_address, translate
from shared.nvml.errors import (
    EventSetClosedError,
    GpuLostError,
    NotSupportedError,
    NvmlError,
    NvmlUnavailableError,
)
from shared.nvml.interface import EventSubscription, Nvml
from shared.nvml.model import DEFAULT_EVENT_TYPES, DeviceEvent, EventKind, EventType

# A storm arrives as many events; one thread hop takes up to this many already queued.
_DRAIN_PER_WAIT = 64
DEFAULT_POLL_INTERVAL_S = 0.2

_KINDS = {
    EventType.XID_CRITICAL_ERROR: EventKind.XID,
    EventType.DOUBLE_BIT_ECC: EventKind.DOUBLE_BIT_ECC,
    EventType.SINGLE_BIT_ECC: EventKind.SINGLE_BIT_ECC,
    EventType.GPU_RECOVERY_ACTION: EventKind.RECOVERY_ACTION,
}


class PynvmlEventSubscription:
    """An NVML event set registered for some GPUs; see :class:`EventSubscription`."""

    def __init__(
        self, *, event_set: Any, handles: Mapping[int, Any], skipped: tuple[int, ...]
    ) -> None:
        self._event_set = event_set
        self._handles = dict(handles)
        self._gpu_by_address = {pointer_address(handle): gpu for gpu, handle in handles.items()}
        self._skipped = skipped
        self._buffer: deque[DeviceEvent] = deque()
        # Held for the whole of a wait: NVML leaves freeing a set under a waiter undefined.
        self._wait_lock = threading.Lock()
        self._closed = False
        self._freed = False

    @classmethod
    def open(
        cls, *, handles: Mapping[int, Any], event_types: int, skipped: tuple[int, ...] = ()
    ) -> PynvmlEventSubscription:
        """Create an event set and register each GPU for the wanted types it supports."""
        with nvml_errors("nvmlEventSetCreate"):
            event_set = pynvml.nvmlEventSetCreate()
        registered: dict[int, Any] = {}
        lost = list(skipped)
        try:
            for gpu, handle in handles.items():
                try:
                    with nvml_errors("nvmlDeviceRegisterEvents", gpu=gpu):
                        # NVML refuses a whole registration naming one unsupported type.
                        wanted = event_types & pynvml.nvmlDeviceGetSupportedEventTypes(handle)
                        if wanted:
                            pynvml.nvmlDeviceRegisterEvents(handle, wanted, event_set)
                except GpuLostError:
                    lost.append(gpu)
                    continue
                except NotSupportedError:
                    continue  # a GPU without events: nothing to register
                if wanted:
                    registered[gpu] = handle
        except BaseException:
            _free_quietly(event_set)
            raise
        return cls(event_set=event_set, handles=registered, skipped=tuple(sorted(lost)))

    @property
    def gpus(self) -> tuple[int, ...]:
        return tuple(sorted(self._handles))

    @property
    def skipped(self) -> tuple[int, ...]:
        return self._skipped

    def next_event(self) -> DeviceEvent | None:
        try:
            return self._buffer.popleft()
        except IndexError:
            return None

    def wait(self, *, timeout_s: float) -> bool:
        if self._buffer:
            return True
        with self._wait_lock:
            if self._closed:
                raise EventSetClosedError("the event subscription is closed")
            try:
                data = pynvml.nvmlEventSetWait_v2(self._event_set, max(0, round(timeout_s * 1000)))
            except pynvml.NVMLError_Timeout:
                return False
            except pynvml.NVMLError as error:
                raise self._wait_failure(error) from error
            self._buffer.append(self._event(data))
            for _ in range(_DRAIN_PER_WAIT):
                try:
                    data = pynvml.nvmlEventSetWait_v2(self._event_set, 0)
                except pynvml.NVMLError:
                    # Nothing more queued, or a failure the next wait reports on its own.
                    break
                self._buffer.append(self._event(data))
            return True

    def close(self) -> None:
        self._closed = True
        with self._wait_lock:
            if self._freed:
                return
            self._freed = True
            try:
                with nvml_errors("nvmlEventSetFree"):
                    pynvml.nvmlEventSetFree(self._event_set)
            except NvmlUnavailableError:
                # The library or driver went away and took the set with it.
                pass

    def _event(self, data: Any) -> DeviceEvent:
        event_type = int(data.eventType)
        return DeviceEvent(
            gpu_index=self._gpu_by_address.get(pointer_address(data.device)),
            kind=_kind(event_type),
            event_type=event_type,
            data=int(data.eventData),
        )

    def _wait_failure(self, error: pynvml.NVMLError) -> NvmlError:
        failure = translate(error, what="nvmlEventSetWait_v2")
        if not isinstance(failure, GpuLostError):
            return failure
        # The set covers several GPUs and the wait does not say which one fell off.
        lost = tuple(gpu for gpu, handle in sorted(self._handles.items()) if _is_lost(handle))
        return GpuLostError(f"GPUs {list(lost)} are lost", gpus=lost, code=failure.code)


def _kind(event_type: int) -> EventKind:
    for flag, kind in _KINDS.items():
        if event_type & flag:
            return kind
    return EventKind.OTHER


def _is_lost(handle: Any) -> bool:
    try:
        pynvml.nvmlDeviceGetUUID(handle)
    except pynvml.NVMLError_GpuIsLost:
        return True
    except pynvml.NVMLError:
        return False
    return False


def _free_quietly(event_set: Any) -> None:
    # Only on the way out of a failed open, whose own error is the one worth raising.
    with suppress(pynvml.NVMLError):
        pynvml.nvmlEventSetFree(event_set)


async def watch_events(
    subscription: EventSubscription, *, poll_interval_s: float = DEFAULT_POLL_INTERVAL_S
) -> AsyncGenerator[DeviceEvent, None]:
    """Yield the subscription's events as they arrive, waiting in a worker thread.

    Raises what the wait raises (GpuLostError, NvmlUnavailableError ...). Stops when the
    consumer stops iterating or is cancelled; the subscription stays open for its owner.
    """
    while True:
        event = subscription.next_event()
        if event is None:
            await asyncio.to_thread(subscription.wait, timeout_s=poll_interval_s)
        else:
            yield event


@asynccontextmanager
async def subscribed(
    nvml: Nvml, *, gpus: list[int] | None = None, event_types: int = DEFAULT_EVENT_TYPES
) -> AsyncIterator[EventSubscription]:
    """An open subscription for the block, closed (after its last wait returned) on exit."""
    subscription = await asyncio.to_thread(nvml.open_events, gpus=gpus, event_types=event_types)
    try:
        yield subscription
    finally:
        await asyncio.to_thread(subscription.close)
