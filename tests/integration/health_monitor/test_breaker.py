"""The circuit breaker: monitors of many nodes, each reading only its own Node, and the arbiter
(the clique allocator's leader in a cluster) never put NoExecute on more nodes than the cap,
whatever the number of nodes that fault at once.

Eight monitors in one process (36 in one test), each with an informer on its own Node only, and
the arbiter with its informer on every Node, against the API emulator and a real nats-server. A
fatal fault (NVML asks for a GPU reset) on every node at once: a watch on every Node checks that
at no moment more than the cap carry NoExecute; the others show NoSchedule, the condition reason
``CircuitBreakerOpen``, a ``GpuFaultTaintWithheld`` Event naming the cap and the withheld metric.
When faults recover and the window has passed, the held-back nodes whose fault still holds get
NoExecute; when every fault is gone the breaker closes: no taint, no breaker record or verdict,
every node healthy. Without an arbiter a fatal fault gets NoSchedule and says it waits; a new
arbiter that takes over mid-storm counts what the old one granted.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pynvml
import pytest

from services.clique_allocator.breaker import BreakerSettings as Caps
from services.health_monitor.settings import BreakerSettings, MonitorSettings
from shared.crds.names import (
    BREAKER_ANNOTATION,
    BREAKER_VERDICT_ANNOTATION,
    GPU_FAULT_TAINT,
    GPU_HEALTHY_CONDITION,
)
from shared.kube.client import KubeClient
from shared.kube.informer import Informer, InformerSettings
from shared.kube.models import Node
from shared.kube.recorder import EventRecorder
from shared.kube.resources import EVENTS, NODES
from sim.kubeapi import KubeServer
from sim.kubelet import connect_for_kubelets
from tests.integration.health_monitor.harness import FAST, Harness, MonitorFactory
from tests.support.arbiter import Arbiter
from tests.support.wait import wait_for

pytestmark = pytest.mark.timeout(60)

NODES_IN_TEST = 8
# A quarter of an 8-node clique: 2 nodes. The cluster's cap is out of the way here.
CAPS = Caps(clique_share=0.25, cluster_share=1.0, window_s=1.5, claim_timeout_s=5)
SETTINGS = msgspec.structs.replace(FAST, breaker=BreakerSettings(claim_timeout_s=5))
# XIDs arrive as NVML events, so every monitor reacts within a millisecond of the others;
# latched long enough to look at the result.
XID_SETTINGS = msgspec.structs.replace(SETTINGS, xid_latch_s=3.0)
CAP = 2
RESET = pynvml.NVML_GPU_RECOVERY_ACTION_GPU_RESET
NO_ACTION = pynvml.NVML_GPU_RECOVERY_ACTION_NONE


class InvolvedObject(msgspec.Struct):
    kind: str
    name: str


class KubeEvent(msgspec.Struct, rename="camel"):
    reason: str
    type: str
    message: str
    involved_object: InvolvedObject


class EventList(msgspec.Struct):
    items: list[KubeEvent]


class NoExecuteWatch:
    """Every Node as a watch sees it; the most nodes that carried NoExecute at one moment."""

    def __init__(self, client: KubeClient) -> None:
        self.informer = Informer(
            client, NODES, Node, settings=InformerSettings(backoff_initial_s=0.05)
        )
        self.informer.add_handler(self._on_node)
        self.most = 0

    def effects(self) -> dict[str, str | None]:
        return {
            node.metadata.name: next(
                (t.effect for t in node.spec.taints if t.key == GPU_FAULT_TAINT), None
            )
            for node in self.informer.cache.objects()
        }

    def no_execute(self) -> set[str]:
        return {name for name, effect in self.effects().items() if effect == "NoExecute"}

    def _on_node(self, _old: Node | None, _new: Node | None) -> None:
        self.most = max(self.most, len(self.no_execute()))

    def check(self, cap: int = CAP) -> None:
        """Fail at once (not at a wait's timeout) when the cap was ever passed."""
        assert self.most <= cap, f"{self.most} nodes carried NoExecute at once; the cap is {cap}"


@contextlib.asynccontextmanager
async def watching(client: KubeClient) -> AsyncIterator[NoExecuteWatch]:
    watch = NoExecuteWatch(client)
    task = asyncio.create_task(watch.informer.run())
    try:
        await watch.informer.wait_synced()
        yield watch
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def skewed(offset_s: float) -> Callable[[], datetime]:
    """A node's wall clock ``offset_s`` ahead of true time (behind when negative)."""
    return lambda: datetime.now(UTC) + timedelta(seconds=offset_s)


@contextlib.asynccontextmanager
async def monitors(
    start_monitor: MonitorFactory,
    client: KubeClient,
    settings: MonitorSettings = SETTINGS,
    nodes: Sequence[int] = range(NODES_IN_TEST),
    skews_s: Sequence[float] = (),
    monitor_client: KubeClient | None = None,
) -> AsyncIterator[list[Harness]]:
    """Monitors on ``nodes`` of the topology (by default the first of rack 0, one clique),
    each recording Events; ``skews_s``: each monitor's wall clock offset (none by default);
    ``monitor_client``: the client the monitors share (by default the test's)."""
    async with contextlib.AsyncExitStack() as stack:
        harnesses = []
        for position, index in enumerate(nodes):
            recorder = EventRecorder(client, component="health-monitor", instance=f"m{index}")
            clock: dict[str, Any] = {"wall_clock": skewed(skews_s[position])} if skews_s else {}
            if monitor_client is not None:
                clock["client"] = monitor_client
            harnesses.append(
                await stack.enter_async_context(
                    start_monitor(index, settings=settings, recorder=recorder, **clock)
                )
            )
        for h in harnesses:
            await h.settled()
        yield harnesses


async def reasons(harnesses: list[Harness]) -> dict[str, str]:
    found: dict[str, str] = {}
    for h in harnesses:
        condition = await h.condition()
        found[h.name] = condition.reason if condition is not None else ""
    return found


async def breaker_events(client: KubeClient, reason: str) -> dict[str, str]:
    listed = msgspec.json.decode(await client.list(EVENTS, namespace="default"), type=EventList)
    return {
        item.involved_object.name: item.message
        for item in listed.items
        if item.reason == reason and item.involved_object.kind == "Node"
    }


async def test_taints_stop_at_the_cap_and_the_breaker_reports_then_closes(
    start_monitor: MonitorFactory, kube_client: KubeClient, arbiter: Arbiter
) -> None:
    await arbiter.start(CAPS)
    async with (
        monitors(start_monitor, kube_client, XID_SETTINGS) as hs,
        watching(kube_client) as watch,
    ):
        for h in hs:  # every node at once: the claims race each other
            h.sim.raise_xid(1, 79)

        async def settled_open() -> dict[str, str] | None:
            watch.check()
            effects = watch.effects()
            found = await reasons(hs)
            done = (
                sorted(effects[h.name] or "" for h in hs)
                == ["NoExecute"] * CAP + ["NoSchedule"] * (NODES_IN_TEST - CAP)
                and sorted(found.values()).count("CircuitBreakerOpen") == NODES_IN_TEST - CAP
            )
            return found if done else None

        found = await wait_for(settled_open, what="the cap reached and the rest held back")
        tainted = watch.no_execute()
        held = {h.name for h in hs} - tainted
        assert len(tainted) == CAP
        assert {found[name] for name in tainted} == {"GpuFault"}
        for h in hs:
            if h.name in held:
                condition = await h.condition()
                assert condition is not None and condition.status == "False"
                assert "NoExecute withheld by the circuit breaker" in condition.message
                assert f"cap 25%: {CAP}" in condition.message
                assert h.metric("cdo_health_breaker_withheld") == 1
                assert h.metric("cdo_health_breaker_decisions_total", result="withheld") >= 1
            else:
                assert h.metric("cdo_health_breaker_withheld") == 0
                assert h.metric("cdo_health_breaker_decisions_total", result="granted") == 1
            # The fault is reported on NATS by every node, held back or not.
            (fault,) = await wait_for(h.faults, what=f"a NodeFault from {h.name}")
            assert (fault.signal, fault.code, fault.severity) == ("xid", 79, "fatal")

        async def withheld_events() -> dict[str, str] | None:
            events = await breaker_events(kube_client, "GpuFaultTaintWithheld")
            return events if set(events) == held else None

        events = await wait_for(withheld_events, what="an Event on each held-back node")
        for message in events.values():
            assert f"hold NoExecute or had it within 1.5s (cap 25%: {CAP})" in message
            assert "clique" in message

        # The XIDs' latch ends, then the hold-down, then the grants' window.
        async def closed() -> bool:
            nodes = [await h.node() for h in hs]
            return all(
                not any(t.key == GPU_FAULT_TAINT for t in node.spec.taints)
                and BREAKER_ANNOTATION not in node.metadata.annotations
                and BREAKER_VERDICT_ANNOTATION not in node.metadata.annotations
                and (c := node.condition(GPU_HEALTHY_CONDITION)) is not None
                and c.reason == "GpuHealthy"
                for node in nodes
            )

        await wait_for(closed, what="every taint, breaker record and verdict gone", timeout=15)
        assert watch.most == CAP
        assert all(h.metric("cdo_health_breaker_withheld") == 0 for h in hs)
        assert all(h.running for h in hs)


async def test_node_clocks_30s_ahead_and_behind_keep_the_cap(
    start_monitor: MonitorFactory, kube_client: KubeClient, arbiter: Arbiter
) -> None:
    """Half the monitors' clocks run 30 s ahead, half 30 s behind: each would read the others'
    claims and grants as 30 or 60 s older or younger than they are, past a claim's timeout (5 s)
    and a grant's window (1.5 s). Every node faults at once, and still no more than the cap
    carry NoExecute; when the first ones recover, the next ones follow, never more at once:
    the arbiter times every record by when it saw it, on its own clock, and each monitor judges
    only its own claim, by its own clock."""
    await arbiter.start(CAPS)
    skews = [30.0 if index % 2 else -30.0 for index in range(NODES_IN_TEST)]
    async with (
        monitors(start_monitor, kube_client, skews_s=skews) as hs,
        watching(kube_client) as watch,
    ):
        for h in hs:
            h.sim.set_recovery_action(0, RESET)

        async def capped() -> set[str] | None:
            watch.check()
            tainted = watch.no_execute()
            withheld = sum(h.metric("cdo_health_breaker_withheld") for h in hs)
            return tainted if len(tainted) == CAP and withheld == NODES_IN_TEST - CAP else None

        first = await wait_for(capped, what="the cap reached, the rest held back")
        for h in hs:
            if h.name in first:
                h.sim.set_recovery_action(0, NO_ACTION)

        async def moved_on() -> set[str] | None:
            watch.check()
            tainted = watch.no_execute()
            return tainted if len(tainted) == CAP and not tainted & first else None

        await wait_for(moved_on, what="NoExecute on two held-back nodes", timeout=15)
        assert watch.most == CAP


async def test_held_back_taints_follow_once_the_share_falls_below_the_cap(
    start_monitor: MonitorFactory, kube_client: KubeClient, arbiter: Arbiter
) -> None:
    await arbiter.start(CAPS)
    async with monitors(start_monitor, kube_client) as hs, watching(kube_client) as watch:
        for h in hs:
            h.sim.set_recovery_action(0, RESET)

        async def capped() -> set[str] | None:
            watch.check()
            tainted = watch.no_execute()
            withheld = sum(h.metric("cdo_health_breaker_withheld") for h in hs)
            return tainted if len(tainted) == CAP and withheld == NODES_IN_TEST - CAP else None

        first = await wait_for(capped, what="the cap reached")
        # The granted nodes recover; the others' fault still holds.
        for h in hs:
            if h.name in first:
                h.sim.set_recovery_action(0, NO_ACTION)

        async def moved_on() -> set[str] | None:
            watch.check()
            tainted = watch.no_execute()
            return tainted if len(tainted) == CAP and not tainted & first else None

        # Hold-down (0.6 s) and window (1.5 s) pass, then two held-back nodes take NoExecute.
        second = await wait_for(moved_on, what="NoExecute on two held-back nodes", timeout=15)
        assert watch.most == CAP
        for h in hs:
            if h.name in second:
                condition = await h.condition()
                assert condition is not None and condition.reason == "GpuFault"

        async def released() -> dict[str, str] | None:
            events = await breaker_events(kube_client, "GpuFaultTaintReleased")
            return events if set(events) == second else None

        await wait_for(released, what="a GpuFaultTaintReleased Event on each")
        remaining = {h.name for h in hs} - first - second
        assert sum(h.metric("cdo_health_breaker_withheld") for h in hs) == len(remaining)


async def test_the_cluster_cap_counts_every_clique(
    start_monitor: MonitorFactory, kube_client: KubeClient, arbiter: Arbiter
) -> None:
    """Three nodes of each rack, the clique cap out of the way: a third of the six nodes."""
    await arbiter.start(Caps(clique_share=1.0, cluster_share=0.34, window_s=1.5))
    settings = FAST
    racks = (0, 1, 2, 18, 19, 20)
    async with (
        monitors(start_monitor, kube_client, settings, racks) as hs,
        watching(kube_client) as watch,
    ):
        assert len({h.clique for h in hs}) == 2
        for h in hs:
            h.sim.set_recovery_action(0, RESET)

        async def capped() -> dict[str, str] | None:
            watch.check(2)
            found = await reasons(hs)
            held = [name for name, reason in found.items() if reason == "CircuitBreakerOpen"]
            return found if len(watch.no_execute()) == 2 and len(held) == 4 else None

        found = await wait_for(capped, what="two nodes of six with NoExecute, four held back")
        held = {name for name, reason in found.items() if reason == "CircuitBreakerOpen"}

        async def withheld_events() -> dict[str, str] | None:
            events = await breaker_events(kube_client, "GpuFaultTaintWithheld")
            return events if set(events) == held else None

        events = await wait_for(withheld_events, what="an Event on each held-back node")
        for message in events.values():  # the arbiter counts its grants as it makes them
            assert re.search(r"2 of 6 nodes of the cluster hold NoExecute", message), message
            assert message.endswith("(cap 34%: 2)"), message


async def test_without_an_answer_a_fatal_fault_gets_noschedule_and_says_why(
    start_monitor: MonitorFactory, kube_client: KubeClient, arbiter: Arbiter
) -> None:
    """No arbiter (the allocator down): the claim waits half its timeout, then the node carries
    NoSchedule and its condition says no answer came; once an arbiter runs, NoExecute follows.
    An arbiter that takes over while some nodes hold NoExecute counts them: still the cap."""
    arbiter.start_none()
    async with monitors(start_monitor, kube_client) as hs, watching(kube_client) as watch:
        for h in hs:
            h.sim.set_recovery_action(0, RESET)

        async def waiting() -> bool:
            watch.check(0)  # no NoExecute anywhere while no one answers
            effects = watch.effects()
            if any(effects[h.name] != "NoSchedule" for h in hs):
                return False
            # The taint may come before the claim has waited half its timeout: the condition
            # says why only from then on.
            conditions = [(await h.condition()) for h in hs]
            return all(
                c is not None and "no answer to this node's claim for NoExecute since" in c.message
                for c in conditions
            )

        await wait_for(waiting, what="NoSchedule on every node, saying no one answers")
        assert all(h.metric("cdo_health_breaker_withheld") == 1 for h in hs)

        await arbiter.start(CAPS)

        async def capped() -> set[str] | None:
            watch.check()
            tainted = watch.no_execute()
            return tainted if len(tainted) == CAP else None

        first = await wait_for(capped, what="the cap reached once an arbiter answers")
        # The arbiter is replaced (a new leader): it reads every Node afresh and counts the
        # nodes that hold NoExecute; held nodes stay held.
        await arbiter.stop()
        await arbiter.start(CAPS)
        await wait_for(lambda: arbiter.running, what="the new arbiter")
        for _ in range(3):  # a while in which nothing may change: no place is free
            await asyncio.sleep(0.5)
            watch.check()
        assert watch.no_execute() == first


MANY = msgspec.structs.replace(SETTINGS, read_interval_s=0.5, event_wait_s=0.5)


async def test_two_racks_faulting_at_once_keep_each_cliques_cap(
    start_monitor: MonitorFactory, kube_client: KubeClient, arbiter: Arbiter, emulator: KubeServer
) -> None:
    """Every node of two 18-node racks faults at once: 36 monitors claim together, each reading
    its own Node; the arbiter lets 4 of each rack's 18 carry NoExecute, never more."""
    # Each monitor waits for NVML events in a worker thread, as the node host gives each node.
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=2 * 36 + 4))
    await arbiter.start(Caps(clique_share=0.25, cluster_share=1.0, window_s=1.5))
    # Three watches per monitor: more connections than a client's pool holds by default.
    client = await connect_for_kubelets(emulator.kubeconfig, kubelets=2 * 36)
    try:
        await _two_racks_fault(start_monitor, kube_client, client, arbiter)
    finally:
        await client.close()


async def _two_racks_fault(
    start_monitor: MonitorFactory, kube_client: KubeClient, client: KubeClient, arbiter: Arbiter
) -> None:
    async with (
        monitors(start_monitor, kube_client, MANY, range(36), monitor_client=client) as hs,
        watching(kube_client) as watch,
    ):
        for h in hs:
            h.sim.set_recovery_action(0, RESET)

        def per_rack() -> dict[str, int]:
            tainted = watch.no_execute()
            counts: dict[str, int] = {}
            for h in hs:
                counts[h.clique] = counts.get(h.clique, 0) + (h.name in tainted)
            return counts

        async def capped() -> dict[str, int] | None:
            watch.check(8)
            found = per_rack()
            assert all(count <= 4 for count in found.values()), found
            withheld = sum(h.metric("cdo_health_breaker_withheld") for h in hs)
            return found if sorted(found.values()) == [4, 4] and withheld == 28 else None

        await wait_for(capped, what="4 of each rack with NoExecute, 28 held back", timeout=30)
        assert watch.most == 8
        assert arbiter.count("granted") == 8
