"""Events through nvmlEventSetWait_v2: XIDs arrive promptly, in order, and stopping is clean."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import aclosing

import pynvml
import pytest

from shared.nvml import (
    DeviceEvent,
    EventKind,
    EventSetClosedError,
    EventSubscription,
    EventType,
    GpuLostError,
    NvmlUnavailableError,
    PynvmlNvml,
    RecoveryAction,
    subscribed,
    watch_events,
)
from sim.nvml import SimulatedNvml, bind
from sim.topology import Cluster
from tests.support.wait import wait_for

POLL_S = 0.05  # short, so that cancellation and close are quick to observe
BOUND_S = 5.0  # generous upper bound for anything the tests wait on


async def next_events(subscription: EventSubscription, count: int) -> list[DeviceEvent]:
    events: list[DeviceEvent] = []
    async with aclosing(watch_events(subscription, poll_interval_s=POLL_S)) as stream:
        async for event in stream:
            events.append(event)
            if len(events) == count:
                break
    return events


@pytest.fixture
async def subscription(nvml: PynvmlNvml) -> AsyncIterator[EventSubscription]:
    async with subscribed(nvml) as opened:
        yield opened


async def test_xid_is_delivered_within_a_bounded_time(
    sim: SimulatedNvml, subscription: EventSubscription
) -> None:
    consumer = asyncio.create_task(next_events(subscription, 1))
    started = time.monotonic()
    sim.raise_xid(2, 79)
    (event,) = await asyncio.wait_for(consumer, timeout=BOUND_S)
    elapsed = time.monotonic() - started
    assert (event.kind, event.xid, event.gpu_index) == (EventKind.XID, 79, 2)
    # The waiting thread wakes on the event itself, not on its poll timeout.
    assert elapsed < 1.0


async def test_a_storm_of_xids_arrives_complete_and_in_order(
    sim: SimulatedNvml, subscription: EventSubscription
) -> None:
    raised = [(gpu, xid) for xid in (13, 31, 43, 45, 68, 94) for gpu in range(4)] * 20
    for gpu, xid in raised:
        sim.raise_xid(gpu, xid)
    events = await asyncio.wait_for(next_events(subscription, len(raised)), timeout=BOUND_S)
    assert [(event.gpu_index, event.xid) for event in events] == raised


async def test_recovery_action_and_double_bit_ecc_events(
    sim: SimulatedNvml, subscription: EventSubscription
) -> None:
    sim.set_recovery_action(1, pynvml.NVML_GPU_RECOVERY_ACTION_GPU_RESET)
    sim.add_ecc_errors(3, uncorrected=1)
    first, second = await asyncio.wait_for(next_events(subscription, 2), timeout=BOUND_S)
    assert (first.kind, first.gpu_index, first.data) == (
        EventKind.RECOVERY_ACTION,
        1,
        RecoveryAction.GPU_RESET,
    )
    assert first.xid is None
    assert (second.kind, second.gpu_index) == (EventKind.DOUBLE_BIT_ECC, 3)


async def test_cancelled_consumer_stops_promptly_and_loses_no_event(
    sim: SimulatedNvml, subscription: EventSubscription
) -> None:
    consumer = asyncio.create_task(next_events(subscription, 1))
    await asyncio.sleep(0)  # let it start waiting
    consumer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(consumer, timeout=BOUND_S)
    # Raised while nobody consumes; a wait orphaned by the cancel may take it into the buffer.
    sim.raise_xid(0, 48)
    (event,) = await asyncio.wait_for(next_events(subscription, 1), timeout=BOUND_S)
    assert (event.gpu_index, event.xid) == (0, 48)


async def test_close_waits_for_the_running_wait_and_frees_the_set(
    sim: SimulatedNvml, nvml: PynvmlNvml
) -> None:
    subscription = await asyncio.to_thread(nvml.open_events)
    assert sim.open_event_sets == 1
    waiting = asyncio.create_task(asyncio.to_thread(subscription.wait, timeout_s=0.3))
    # The lock is held for exactly the duration of a wait inside NVML.
    await wait_for(subscription._wait_lock.locked, timeout=BOUND_S, what="a wait in NVML")
    await asyncio.wait_for(asyncio.to_thread(subscription.close), timeout=BOUND_S)
    assert sim.open_event_sets == 0
    # The wait that was running returned on its own timeout, not into a freed set.
    assert await asyncio.wait_for(waiting, timeout=BOUND_S) is False
    with pytest.raises(EventSetClosedError):
        subscription.wait(timeout_s=0)
    subscription.close()  # idempotent


async def test_subscribed_block_closes_the_set_when_cancelled(
    sim: SimulatedNvml, nvml: PynvmlNvml
) -> None:
    async def consume() -> None:
        async with subscribed(nvml) as subscription:
            await next_events(subscription, 1)

    task = asyncio.create_task(consume())
    await wait_for(lambda: sim.open_event_sets == 1, timeout=BOUND_S, what="event set opened")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, timeout=BOUND_S)
    assert sim.open_event_sets == 0


async def test_gpu_lost_while_waiting_after_its_xid(
    sim: SimulatedNvml, subscription: EventSubscription
) -> None:
    consumer = asyncio.create_task(next_events(subscription, 2))
    sim.raise_xid(2, 79)
    sim.set_gpu_lost(2)
    with pytest.raises(GpuLostError) as raised:
        await asyncio.wait_for(consumer, timeout=BOUND_S)
    assert raised.value.gpus == (2,)


async def test_xid_before_the_loss_is_delivered_first(
    sim: SimulatedNvml, subscription: EventSubscription
) -> None:
    sim.raise_xid(2, 79)
    sim.set_gpu_lost(2)
    seen: list[int | None] = []

    async def consume() -> None:
        async for event in watch_events(subscription, poll_interval_s=POLL_S):
            seen.append(event.xid)

    with pytest.raises(GpuLostError):
        await asyncio.wait_for(consume(), timeout=BOUND_S)
    assert seen == [79]


async def test_lost_gpu_is_skipped_when_opening(sim: SimulatedNvml, nvml: PynvmlNvml) -> None:
    sim.set_gpu_lost(2)
    async with subscribed(nvml) as subscription:
        assert subscription.gpus == (0, 1, 3)
        assert subscription.skipped == (2,)
        sim.raise_xid(3, 95)
        (event,) = await asyncio.wait_for(next_events(subscription, 1), timeout=BOUND_S)
        assert (event.gpu_index, event.xid) == (3, 95)


async def test_only_the_requested_gpus_are_registered(sim: SimulatedNvml, nvml: PynvmlNvml) -> None:
    async with subscribed(nvml, gpus=[1]) as subscription:
        assert subscription.gpus == (1,)
        sim.raise_xid(0, 79)
        sim.raise_xid(1, 74)
        (event,) = await asyncio.wait_for(next_events(subscription, 1), timeout=BOUND_S)
        assert (event.gpu_index, event.xid) == (1, 74)


async def test_nvml_unavailable_while_waiting(
    sim: SimulatedNvml, subscription: EventSubscription
) -> None:
    consumer = asyncio.create_task(next_events(subscription, 1))
    sim.set_unavailable()
    with pytest.raises(NvmlUnavailableError):
        await asyncio.wait_for(consumer, timeout=BOUND_S)
    sim.set_available()


async def test_types_a_gpu_lacks_are_left_out_of_its_registration(cluster: Cluster) -> None:
    # NVML would refuse the whole registration if it named the unsupported types.
    xid_only = SimulatedNvml(cluster.nodes[1], supported_event_types=EventType.XID_CRITICAL_ERROR)
    with bind(xid_only):
        nvml = PynvmlNvml()
        nvml.init()
        try:
            async with subscribed(nvml) as subscription:
                assert subscription.gpus == (0, 1, 2, 3)
                xid_only.raise_xid(0, 119)
                (event,) = await asyncio.wait_for(next_events(subscription, 1), timeout=BOUND_S)
                assert event.xid == 119
        finally:
            nvml.shutdown()


async def test_a_gpu_without_any_wanted_type_is_not_registered(cluster: Cluster) -> None:
    pstate_only = SimulatedNvml(cluster.nodes[1], supported_event_types=0x4)
    with bind(pstate_only):
        nvml = PynvmlNvml()
        nvml.init()
        try:
            async with subscribed(nvml) as subscription:
                assert subscription.gpus == ()
                assert not await asyncio.to_thread(subscription.wait, timeout_s=0)
        finally:
            nvml.shutdown()
