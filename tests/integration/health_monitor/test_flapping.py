"""A flapping GPU and an XID storm: one taint episode, a bounded number of events."""

from __future__ import annotations

import time

import msgspec

from sim.nvml import HealthField
from tests.integration.health_monitor.harness import FAST, Harness, MonitorFactory, TaintHistory
from tests.support.wait import wait_for

TRUE, FALSE = 1, 2  # values of a boolean fabric health sub-field


def fatal_fabric_signals(h: Harness) -> float:
    return h.metric("cdo_health_signals_total", signal="fabric", severity="fatal")


async def flap_once(h: Harness, flap: int) -> None:
    """Fault, wait until a reading saw it; clear, wait until two readings went by."""
    h.sim.set_fabric_health(1, HealthField.ROUTE_UNHEALTHY, TRUE)
    await wait_for(lambda: fatal_fabric_signals(h) > flap, what=f"fault {flap + 1} seen")
    readings = h.metric("cdo_health_readings_total")
    h.sim.set_fabric_health(1, HealthField.ROUTE_UNHEALTHY, FALSE)
    await wait_for(
        lambda: h.metric("cdo_health_readings_total") >= readings + 2,
        what=f"clear {flap + 1} seen",
    )


async def test_a_flapping_gpu_is_one_taint_episode_with_bounded_events(
    start_monitor: MonitorFactory,
) -> None:
    # A hold-down well above one flap, however slow the machine running the test.
    settings = msgspec.structs.replace(FAST, hold_down_s=2.0)
    async with start_monitor(settings=settings) as h:
        await h.settled()
        async with TaintHistory(h.client, h.name) as history:
            started = time.monotonic()
            for flap in range(10):
                await flap_once(h, flap)
            assert time.monotonic() - started < 5, "ten flaps within five seconds"
            await wait_for(h.recoveries, what="NodeRecovered", timeout=10)
            await wait_for(lambda: history.effects[-1] is None, what="the taint removed")

        assert history.effects == [None, "NoExecute", None]
        assert history.episodes == 1
        assert len(h.faults()) == 1
        assert len(h.recoveries()) == 1
        assert h.metric("cdo_health_fault_episodes_total") == 1


async def test_an_xid_storm_is_cut_to_the_burst(start_monitor: MonitorFactory) -> None:
    settings = msgspec.structs.replace(FAST, event_burst=3, event_rate_per_s=0.0, xid_latch_s=60.0)
    xids = (46, 48, 62, 64, 74, 79, 95, 109, 110, 119)
    async with start_monitor(settings=settings) as h:
        await h.settled()
        for gpu in range(4):
            for xid in xids:
                h.sim.raise_xid(gpu, xid)

        def decided() -> float:
            return h.metric("cdo_health_fault_events_total", result="published") + h.metric(
                "cdo_health_fault_events_total", result="suppressed"
            )

        await wait_for(lambda: decided() == 40, what="forty faults decided")
        # The escalation to NoExecute always goes out, then the burst; the rest are counted.
        assert h.metric("cdo_health_fault_events_total", result="published") == 4
        assert h.metric("cdo_health_fault_events_total", result="suppressed") == 36
        assert h.metric("cdo_health_signals_total", signal="xid", severity="fatal") == 40
        faults = await wait_for(lambda: h.some_faults(4), what="4 events")
        assert faults[0].severity == "fatal"
        # The NoExecute taint follows the circuit breaker's claim (one more write and its
        # watch event), so it may land a moment after the events.
        taint = await wait_for(h.fault_taint, what="the fault taint")
        assert taint.effect == "NoExecute"
        condition = await h.condition()
        assert condition is not None
        assert condition.message.endswith("and 35 more")  # every fault is on the Node
