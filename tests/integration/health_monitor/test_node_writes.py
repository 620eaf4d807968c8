"""How the monitor writes its Node: only its own fields, through conflicts, level-triggered."""

from __future__ import annotations

import time

import msgspec

from services.health_monitor.settings import BreakerSettings
from shared.crds.names import GPU_FAULT_TAINT, GPU_HEALTHY_CONDITION
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.resources import NODES
from sim.kubeapi import KubeServer
from sim.topology import Cluster
from tests.integration.health_monitor.harness import (
    FAST,
    OTHER_TAINT,
    Harness,
    MonitorFactory,
    create_node,
)
from tests.support.wait import wait_for

UNREACHABLE = {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}


async def taint_keys(h: Harness) -> list[str]:
    return [t.key for t in (await h.node()).spec.taints]


async def test_a_conflicting_taint_write_is_read_again_and_retried(
    start_monitor: MonitorFactory, emulator: KubeServer
) -> None:
    # Without the circuit breaker, whose claim (an annotation, not a conditional write) would
    # be the first patch to fail.
    settings = msgspec.structs.replace(FAST, breaker=BreakerSettings(enabled=False))
    async with start_monitor(settings=settings) as h:
        await h.settled()
        emulator.faults.fail_next(2, code=409, verbs=["patch"], resource="nodes")
        h.sim.set_gpu_lost(0)
        taint = await wait_for(h.fault_taint, what="the fault taint")
        assert taint.effect == "NoExecute"
        assert h.metric("cdo_health_node_writes_total", field="taints", result="conflict") == 2
        assert await taint_keys(h) == [OTHER_TAINT["key"], GPU_FAULT_TAINT]


async def test_taints_written_by_others_meanwhile_are_kept(
    start_monitor: MonitorFactory,
) -> None:
    async with start_monitor() as h:
        await h.settled()
        h.sim.set_gpu_lost(0)
        # Another controller adds its taint while the monitor reacts (read-modify-write too).
        await add_taint(h, UNREACHABLE)
        await wait_for(h.fault_taint, what="the fault taint")

        async def both() -> bool:
            return set(await taint_keys(h)) == {
                OTHER_TAINT["key"],
                UNREACHABLE["key"],
                GPU_FAULT_TAINT,
            }

        await wait_for(both, what="all three taints")
        h.sim.set_gpu_lost(0, False)
        await wait_for(h.recoveries, what="NodeRecovered", timeout=10)
        assert set(await taint_keys(h)) == {OTHER_TAINT["key"], UNREACHABLE["key"]}


async def add_taint(h: Harness, taint: dict[str, str]) -> None:
    """Add a taint the way another controller would: read, modify, write, again on 409."""
    while True:
        node = await h.node()
        current = [
            {"key": t.key, "effect": t.effect, **({"value": t.value} if t.value else {})}
            for t in node.spec.taints
        ]
        try:
            await h.client.patch(
                NODES,
                h.name,
                {
                    "metadata": {"resourceVersion": node.metadata.resource_version},
                    "spec": {"taints": [*current, taint]},
                },
            )
        except KubeApiError as exc:
            if exc.conflict:
                continue
            raise
        return


async def test_a_taint_removed_by_hand_comes_back_while_the_fault_lasts(
    start_monitor: MonitorFactory, kube_client: KubeClient
) -> None:
    async with start_monitor() as h:
        await h.settled()
        h.sim.set_gpu_lost(3)
        await wait_for(h.fault_taint, what="the fault taint")
        await kube_client.patch(NODES, h.name, {"spec": {"taints": [OTHER_TAINT]}})
        assert await h.fault_taint() is None
        taint = await wait_for(h.fault_taint, what="the fault taint restored")
        assert taint.effect == "NoExecute"


async def test_a_restarted_monitor_keeps_the_taint_it_finds_for_a_hold_down(
    start_monitor: MonitorFactory, kube_client: KubeClient, cluster: Cluster
) -> None:
    name = cluster.nodes[0].name
    await create_node(kube_client, name)
    fault_taint = {"key": GPU_FAULT_TAINT, "value": "fatal", "effect": "NoExecute"}
    await kube_client.patch(NODES, name, {"spec": {"taints": [OTHER_TAINT, fault_taint]}})
    started = time.monotonic()
    async with start_monitor(register=False) as h:

        async def held() -> bool:
            condition = await h.condition()
            return condition is not None and condition.reason == "RecoveryHoldDown"

        await wait_for(held, what="condition RecoveryHoldDown")
        assert await h.fault_taint() is not None
        (recovered,) = await wait_for(h.recoveries, what="NodeRecovered", timeout=10)
        assert time.monotonic() - started >= FAST.hold_down_s
        assert recovered.signals == ()  # nothing was seen: only the taint it found
        await h.settled()
        assert await taint_keys(h) == [OTHER_TAINT["key"]]
        assert h.faults() == []


async def test_a_node_registered_after_the_monitor_started(
    start_monitor: MonitorFactory, kube_client: KubeClient
) -> None:
    async with start_monitor(register=False) as h:
        await wait_for(lambda: h.monitor.nvml_available, what="NVML read")
        h.sim.set_gpu_lost(0)
        await wait_for(h.faults, what="the event, without a Node to write")
        await create_node(kube_client, h.name)
        taint = await wait_for(h.fault_taint, what="the fault taint")
        assert taint.effect == "NoExecute"
        condition = await wait_for(h.condition, what="the condition")
        assert condition.type == GPU_HEALTHY_CONDITION
