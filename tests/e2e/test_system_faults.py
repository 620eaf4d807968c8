"""A node-level fault (XID 74, an NVLink error: the fabric is shared) on a domain member on the
whole system: the fault event on NATS, the taint and the node condition, the domain Degraded, its
pod replaced on a healthy node of the same clique, the domain Ready again; after the fault clears,
the node recovers (taint gone, condition healthy, event). Faults of one GPU are GPU-confined
(tests/integration/health_monitor/test_gpu_faults.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from shared.events import subjects
from shared.events.catalog import DomainMembershipChanged, NodeFault, NodeRecovered
from shared.kube.models import Node
from tests.e2e import scenarios
from tests.e2e.scenarios import gpu_healthy, taint_effect
from tests.e2e.whole_system import EventTap, WholeSystem, running_whole_system
from tests.support.wait import wait_for

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.slow,
    pytest.mark.timeout(600),
]

# Long enough that the faulted node is still tainted when the replacement is placed (so the
# allocator must pick another node), short enough that recovery comes within the test.
HEALTH = {"CDO_HEALTH_XID_LATCH_S": "20", "CDO_HEALTH_HOLD_DOWN_S": "5"}
NAMESPACE = "faults"
NAME = "small"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def system() -> AsyncIterator[WholeSystem]:
    async with running_whole_system(HEALTH) as running:
        yield running


async def test_a_node_level_xid_replaces_the_pod_in_the_clique_and_the_node_recovers(
    system: WholeSystem,
) -> None:
    faults = await EventTap().start(system.nats_url, subjects.NODE_FAULT.wildcard())
    recoveries = await EventTap().start(system.nats_url, subjects.NODE_RECOVERED.wildcard())
    memberships = await EventTap().start(system.nats_url, subjects.DOMAIN_MEMBERSHIP.wildcard())
    try:
        outcome = await scenarios.fatal_xid_replaced_in_clique(system, NAMESPACE, NAME)
        victim = outcome.victim

        fault: NodeFault = await wait_for(
            lambda: next((e for e in faults.of_type(NodeFault) if e.node == victim), None),
            timeout=60,
            interval=0.1,
            what="NodeFault on NATS",
        )
        assert (fault.signal, fault.code, fault.severity, fault.scope) == (
            "xid",
            74,
            "fatal",
            "node",
        )
        assert fault.clique == outcome.before.status.clique

        def degraded() -> DomainMembershipChanged | None:
            return next(
                (
                    e
                    for e in memberships.of_type(DomainMembershipChanged)
                    if e.name == NAME and e.phase == "Degraded"
                ),
                None,
            )

        # The member's taint degraded the domain until the evicted pod's replacement ran; the
        # membership event, which every change of phase publishes, shows it where a poll of the
        # status could miss it.
        seen = await wait_for(degraded, timeout=60, interval=0.1, what="domain Degraded event")
        assert seen.reason == "NodeFault"

        await system.inject_fault(victim, None)

        async def recovered() -> Node | None:
            node = await system.node(victim)
            return node if taint_effect(node) is None and gpu_healthy(node) == "True" else None

        # The XID stays latched after the clear, then the hold-down runs.
        await wait_for(recovered, timeout=120, interval=0.3, what="taint gone, GpuHealthy True")
        event: NodeRecovered = await wait_for(
            lambda: next((e for e in recoveries.of_type(NodeRecovered) if e.node == victim), None),
            timeout=30,
            interval=0.1,
            what="NodeRecovered on NATS",
        )
        assert "xid" in event.signals
    finally:
        await faults.close()
        await recoveries.close()
        await memberships.close()
    await system.clean_up(NAMESPACE)
    assert await system.leftovers() == []
