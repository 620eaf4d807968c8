"""XIDs on a simulated GPU: fault events on NATS, the taint and condition, then recovery."""

from __future__ import annotations

import time

from shared.crds.names import GPU_HEALTHY_CONDITION
from tests.integration.health_monitor.harness import (
    FAST,
    OTHER_TAINT,
    Harness,
    MonitorFactory,
    TaintHistory,
)
from tests.support.wait import wait_for


async def _untainted(h: Harness) -> bool:
    return await h.fault_taint() is None


async def condition_reason(h: Harness) -> str:
    condition = await h.condition()
    return condition.reason if condition is not None else ""


async def test_xid_79_evicts_reports_and_recovers_after_the_hold_down(
    start_monitor: MonitorFactory,
) -> None:
    async with start_monitor() as h:
        await h.settled()
        h.sim.raise_xid(1, 79)

        (fault,) = await wait_for(h.faults, what="a NodeFault on NATS")
        assert (fault.signal, fault.code, fault.severity, fault.action) == (
            "xid",
            79,
            "fatal",
            "drain_node",
        )
        assert fault.gpus == (h.gpu_uuid(1),)
        assert fault.clique == h.clique
        assert "XID 79" in fault.message

        taint = await wait_for(h.fault_taint, what="the fault taint")
        tainted_at = time.monotonic()
        assert (taint.effect, taint.value) == ("NoExecute", "fatal")
        assert taint.time_added is not None

        async def faulted() -> bool:
            return await condition_reason(h) == "GpuFault"

        await wait_for(faulted, what="condition GpuFault")
        node = await h.node()
        condition = node.condition(GPU_HEALTHY_CONDITION)
        assert condition is not None
        assert (condition.status, condition.reason) == ("False", "GpuFault")
        assert "GPU 1: XID 79" in condition.message
        # Other writers' taint and condition are untouched.
        assert any(t.key == OTHER_TAINT["key"] for t in node.spec.taints)
        assert node.condition("Ready") is not None

        (recovered,) = await wait_for(h.recoveries, what="NodeRecovered", timeout=10)
        assert time.monotonic() - tainted_at >= FAST.hold_down_s
        assert recovered.signals == ("xid",)
        assert recovered.gpus == (h.gpu_uuid(1),)
        node = await h.settled()  # the event goes out first, the Node follows
        await wait_for(lambda: _untainted(h), what="the fault taint removed")
        assert [t.key for t in (await h.node()).spec.taints] == [OTHER_TAINT["key"]]
        condition = node.condition(GPU_HEALTHY_CONDITION)
        assert condition is not None
        assert condition.status == "True"
        assert len(h.faults()) == 1


async def test_a_lost_gpu_stays_fatal_until_it_returns_and_its_events_resume(
    start_monitor: MonitorFactory,
) -> None:
    async with start_monitor() as h:
        await h.settled()
        h.sim.raise_xid(2, 79)
        h.sim.set_gpu_lost(2)
        taint = await wait_for(h.fault_taint, what="the fault taint")
        assert taint.effect == "NoExecute"

        async def lost_alone() -> bool:
            condition = await h.condition()
            return condition is not None and condition.message == (
                "GPU 2: GPU lost: GPU has fallen off the bus"
            )

        # The XID's latch runs out; the lost GPU keeps the node tainted on its own.
        await wait_for(lost_alone, what="the condition to name only the lost GPU")
        assert (await h.fault_taint()) is not None
        assert {f.signal for f in h.faults()} == {"xid", "gpu_lost"}
        assert h.recoveries() == []

        h.sim.set_gpu_lost(2, False)
        await wait_for(h.recoveries, what="NodeRecovered", timeout=10)
        assert (await h.fault_taint()) is None

        # The GPU is registered for events again.
        h.sim.raise_xid(2, 48)
        await wait_for(
            lambda: [f for f in h.faults() if f.code == 48], what="XID 48 from the returned GPU"
        )


async def test_a_warning_xid_keeps_new_work_away_but_does_not_evict(
    start_monitor: MonitorFactory,
) -> None:
    async with start_monitor() as h:
        await h.settled()
        async with TaintHistory(h.client, h.name) as history:
            h.sim.raise_xid(0, 54)  # auxiliary power: warning, drain_node
            (fault,) = await wait_for(h.faults, what="a NodeFault")
            assert (fault.code, fault.severity, fault.action) == (54, "warning", "drain_node")
            taint = await wait_for(h.fault_taint, what="the fault taint")
            assert (taint.effect, taint.value) == ("NoSchedule", "warning")

            async def degraded() -> bool:
                return await condition_reason(h) == "GpuDegraded"

            await wait_for(degraded, what="condition GpuDegraded")
            await wait_for(h.recoveries, what="NodeRecovered", timeout=10)
            await wait_for(lambda: history.effects[-1] is None, what="the taint removed")
        assert history.effects == [None, "NoSchedule", None]


async def test_a_warning_without_node_action_is_only_reported(
    start_monitor: MonitorFactory,
) -> None:
    async with start_monitor() as h:
        await h.settled()
        async with TaintHistory(h.client, h.name) as history:
            h.sim.raise_xid(3, 78)  # vGPU start error: warning, no action
            (fault,) = await wait_for(h.faults, what="a NodeFault")
            assert (fault.code, fault.severity, fault.action) == (78, "warning", "none")

            async def warned() -> bool:
                return await condition_reason(h) == "GpuWarning"

            await wait_for(warned, what="condition GpuWarning")
            condition = await h.condition()
            assert condition is not None
            assert condition.status == "True"
            await wait_for(h.recoveries, what="NodeRecovered", timeout=10)
        assert history.effects == [None]


async def test_application_xids_change_nothing_but_are_counted(
    start_monitor: MonitorFactory,
) -> None:
    async with start_monitor() as h:
        before = await h.settled()
        async with TaintHistory(h.client, h.name) as history:
            for xid in (13, 31, 43, 45, 68):  # the application's own faults
                h.sim.raise_xid(0, xid)
            await wait_for(
                lambda: h.metric("cdo_health_signals_total", signal="xid", severity="ok") == 5,
                what="five application XIDs counted",
            )
            after = await h.node()
            assert after.metadata.resource_version == before.metadata.resource_version
            assert h.events == []

            # Events still flow: the next real fault is the first one published.
            h.sim.raise_xid(0, 79)
            (fault,) = await wait_for(h.faults, what="a NodeFault")
            assert fault.code == 79
        assert history.effects[0] is None
