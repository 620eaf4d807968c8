"""Faults NVML shows as state (recovery action, NVLinks, row remapping, ECC counters)."""

from __future__ import annotations

import msgspec
import pynvml

from shared.kube.client import KubeClient
from shared.kube.recorder import EventRecorder
from shared.kube.resources import EVENTS
from tests.integration.health_monitor.harness import MonitorFactory, TaintHistory
from tests.support.wait import wait_for


class InvolvedObject(msgspec.Struct):
    kind: str
    name: str


class KubeEvent(msgspec.Struct, rename="camel"):
    reason: str
    type: str
    involved_object: InvolvedObject


class EventList(msgspec.Struct):
    items: list[KubeEvent]


async def test_a_recovery_action_evicts_until_nvml_asks_for_nothing(
    start_monitor: MonitorFactory,
) -> None:
    async with start_monitor() as h:
        await h.settled()
        h.sim.set_recovery_action(2, pynvml.NVML_GPU_RECOVERY_ACTION_GPU_RESET)
        (fault,) = await wait_for(h.faults, what="a NodeFault")
        assert (fault.signal, fault.severity, fault.action) == (
            "recovery_action",
            "fatal",
            "reset_gpu",
        )
        assert (await wait_for(h.fault_taint, what="the fault taint")).effect == "NoExecute"
        h.sim.set_recovery_action(2, pynvml.NVML_GPU_RECOVERY_ACTION_NONE)
        await wait_for(h.recoveries, what="NodeRecovered", timeout=10)
        assert await h.fault_taint() is None


async def test_links_down_and_a_pending_remap_keep_new_work_away(
    start_monitor: MonitorFactory,
) -> None:
    async with start_monitor() as h:
        await h.settled()
        async with TaintHistory(h.client, h.name) as history:
            h.sim.drop_nvlink(0, 3)
            h.sim.set_remapped_rows(1, pending=True)
            faults = await wait_for(lambda: h.some_faults(2), what="two NodeFaults")
            assert {(f.signal, f.severity, f.action) for f in faults} == {
                ("nvlink", "warning", "reset_gpu"),
                ("remapped_rows", "warning", "reset_gpu"),
            }
            assert (await wait_for(h.fault_taint, what="the taint")).effect == "NoSchedule"
            h.sim.restore_nvlink(0, 3)
            h.sim.set_remapped_rows(1, pending=False)
            await wait_for(h.recoveries, what="NodeRecovered", timeout=10)
            await wait_for(lambda: history.effects[-1] is None, what="the taint removed")
        assert history.effects == [None, "NoSchedule", None]


async def test_a_double_bit_ecc_error_with_xid_48(start_monitor: MonitorFactory) -> None:
    async with start_monitor() as h:
        await h.settled()
        h.sim.add_ecc_errors(3, uncorrected=2)
        h.sim.raise_xid(3, 48)
        faults = await wait_for(lambda: h.some_faults(2), what="two NodeFaults")
        assert {(f.signal, f.code, f.severity) for f in faults} == {
            ("ecc", 2, "warning"),
            ("xid", 48, "fatal"),
        }
        assert faults[0].gpus == (h.gpu_uuid(3),)
        assert (await wait_for(h.fault_taint, what="the taint")).effect == "NoExecute"
        await wait_for(h.recoveries, what="NodeRecovered", timeout=10)


async def test_faults_and_recoveries_are_kubernetes_events_on_the_node(
    start_monitor: MonitorFactory, kube_client: KubeClient
) -> None:
    recorder = EventRecorder(kube_client, component="health-monitor", instance="test")
    async with start_monitor(recorder=recorder) as h:
        await h.settled()
        h.sim.raise_xid(1, 79)
        await wait_for(h.recoveries, what="NodeRecovered", timeout=10)

        async def reasons() -> list[tuple[str, str]] | None:
            listed = await kube_client.list(EVENTS, namespace="default")
            found = [
                (item.reason, item.type)
                for item in msgspec.json.decode(listed, type=EventList).items
                if (item.involved_object.kind, item.involved_object.name) == ("Node", h.name)
            ]
            return found if len(found) == 2 else None

        assert sorted(await wait_for(reasons, what="two Events")) == [
            ("GpuFault", "Warning"),
            ("GpuRecovered", "Normal"),
        ]
