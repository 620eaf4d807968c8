"""The circuit breaker: monitors of many nodes, one per node and no coordinator, never put
NoExecute on more nodes than the cap, whatever the number of nodes that fault at once.

Eight monitors in one process, each with its own Node informer, against the API emulator and
a real nats-server. A fatal fault (NVML asks for a GPU reset) on every node at once: a watch
on every Node checks that at no moment more than the cap carry NoExecute; the others show
NoSchedule, the condition reason ``CircuitBreakerOpen``, a ``GpuFaultTaintWithheld`` Event
naming the cap and the withheld metric. When faults recover and the window has passed, the
held-back nodes whose fault still holds get NoExecute; when every fault is gone the breaker
closes: no taint, no breaker record, every node healthy.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime, timedelta

import msgspec
import pynvml
import pytest

from services.health_monitor.settings import BreakerSettings, MonitorSettings
from shared.crds.names import BREAKER_ANNOTATION, GPU_FAULT_TAINT, GPU_HEALTHY_CONDITION
from shared.kube.client import KubeClient
from shared.kube.informer import Informer, InformerSettings
from shared.kube.models import Node
from shared.kube.recorder import EventRecorder
from shared.kube.resources import EVENTS, NODES
from tests.integration.health_monitor.harness import FAST, Harness, MonitorFactory
from tests.support.wait import wait_for

pytestmark = pytest.mark.timeout(60)

NODES_IN_TEST = 8
# A quarter of an 8-node clique: 2 nodes. The cluster's cap is out of the way here.
BREAKER = BreakerSettings(clique_share=0.25, cluster_share=1.0, window_s=1.5, claim_timeout_s=5)
SETTINGS = msgspec.structs.replace(FAST, breaker=BREAKER)
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
) -> AsyncIterator[list[Harness]]:
    """Monitors on ``nodes`` of the topology (by default the first of rack 0, one clique),
    each recording Events; ``skews_s``: each monitor's wall clock offset (none by default)."""
    async with contextlib.AsyncExitStack() as stack:
        harnesses = []
        for position, index in enumerate(nodes):
            recorder = EventRecorder(client, component="health-monitor", instance=f"m{index}")
            clock = {"wall_clock": skewed(skews_s[position])} if skews_s else {}
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
    start_monitor: MonitorFactory, kube_client: KubeClient
) -> None:
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
            assert f"hold NoExecute, claim it or had it within 1.5s (cap 25%: {CAP})" in message
            assert "clique" in message

        # The XIDs' latch ends, then the hold-down, then the grants' window.
        async def closed() -> bool:
            nodes = [await h.node() for h in hs]
            return all(
                not any(t.key == GPU_FAULT_TAINT for t in node.spec.taints)
                and BREAKER_ANNOTATION not in node.metadata.annotations
                and (c := node.condition(GPU_HEALTHY_CONDITION)) is not None
                and c.reason == "GpuHealthy"
                for node in nodes
            )

        await wait_for(closed, what="every taint and breaker record gone", timeout=15)
        assert watch.most == CAP
        assert all(h.metric("cdo_health_breaker_withheld") == 0 for h in hs)
        assert all(h.running for h in hs)


async def test_node_clocks_30s_ahead_and_behind_keep_the_cap(
    start_monitor: MonitorFactory, kube_client: KubeClient
) -> None:
    """Half the monitors' clocks run 30 s ahead, half 30 s behind: each would read the others'
    claims and grants as 30 or 60 s older or younger than they are, past a claim's timeout (5 s)
    and a grant's window (1.5 s). Every node faults at once, and still no more than the cap
    carry NoExecute; when the first ones recover, the next ones follow, never more at once:
    each monitor times the others' records by when it saw them, on its own clock."""
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
    start_monitor: MonitorFactory, kube_client: KubeClient
) -> None:
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
    start_monitor: MonitorFactory, kube_client: KubeClient
) -> None:
    """Three nodes of each rack, the clique cap out of the way: a third of the six nodes."""
    breaker = BreakerSettings(clique_share=1.0, cluster_share=0.34, window_s=1.5)
    settings = msgspec.structs.replace(FAST, breaker=breaker)
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
        for message in events.values():  # others' claims decided meanwhile count as well
            assert re.search(r"[2-5] of 6 nodes of the cluster hold NoExecute", message), message
            assert message.endswith("(cap 34%: 2)"), message
