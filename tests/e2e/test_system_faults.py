"""A node-level fault (XID 74, an NVLink error: the fabric is shared) on a domain member on the
whole system: the fault event on NATS, the taint and the node condition, the domain Degraded, its
pod replaced on a healthy node of the same clique, the domain Ready again; after the fault clears,
the node recovers (taint gone, condition healthy, event). Faults of one GPU are GPU-confined
(tests/integration/health_monitor/test_gpu_faults.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from shared.crds.names import GPU_FAULT_TAINT, GPU_HEALTHY_CONDITION
from shared.events import subjects
from shared.events.catalog import DomainMembershipChanged, NodeFault, NodeRecovered
from shared.kube.models import Node
from sim import control as simctl
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


def taint_effect(node: Node) -> str | None:
    return next((t.effect for t in node.spec.taints if t.key == GPU_FAULT_TAINT), None)


def gpu_healthy(node: Node) -> str | None:
    condition = node.condition(GPU_HEALTHY_CONDITION)
    return None if condition is None else condition.status


async def inject(system: WholeSystem, node: str, body: dict[str, object] | None) -> None:
    await asyncio.to_thread(simctl.fault, system.state_dir, node, body, say=lambda _line: None)


async def test_a_node_level_xid_replaces_the_pod_in_the_clique_and_the_node_recovers(
    system: WholeSystem,
) -> None:
    await system.create_namespace(NAMESPACE)
    # Smaller than a clique, so a healthy node of the same clique has room for the replacement.
    await system.create_workload(NAMESPACE, NAME, replicas=4, gpus=4)
    before = await system.wait_domain_ready(NAMESPACE, NAME, nodes=4)
    pods = await system.wait_running(NAMESPACE, f"app={NAME}", 4)
    clique = before.status.clique
    victim = sorted(pod.spec.node_name for pod in pods)[0]
    evicted = next(pod.metadata.name for pod in pods if pod.spec.node_name == victim)
    assert gpu_healthy(await system.node(victim)) == "True"

    faults = await EventTap().start(system.nats_url, subjects.NODE_FAULT.wildcard())
    recoveries = await EventTap().start(system.nats_url, subjects.NODE_RECOVERED.wildcard())
    memberships = await EventTap().start(system.nats_url, subjects.DOMAIN_MEMBERSHIP.wildcard())
    try:
        await inject(system, victim, {"kind": "xid", "gpu": 1, "xid": 74})

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
        assert fault.clique == clique

        async def tainted() -> Node | None:
            node = await system.node(victim)
            fatal = taint_effect(node) == "NoExecute" and gpu_healthy(node) == "False"
            return node if fatal else None

        await wait_for(tainted, timeout=60, interval=0.2, what="NoExecute taint, GpuHealthy False")

        def degraded() -> DomainMembershipChanged | None:
            return next(
                (
                    e
                    for e in memberships.of_type(DomainMembershipChanged)
                    if e.name == NAME and e.phase == "Degraded"
                ),
                None,
            )

        # The member's taint degrades the domain until the evicted pod's replacement runs; the
        # replacement may be placed at once, so the membership event, which every change of
        # phase publishes, shows it where a poll of the status could miss it.
        seen = await wait_for(degraded, timeout=60, interval=0.1, what="domain Degraded event")
        assert seen.reason == "NodeFault"

        replaced = await system.wait_running(NAMESPACE, f"app={NAME}", 4)
        after = await system.wait_domain_ready(NAMESPACE, NAME, nodes=4)
        names = {pod.metadata.name for pod in replaced}
        assert evicted not in names
        (replacement,) = [pod for pod in replaced if pod.metadata.name not in
                          {p.metadata.name for p in pods}]  # fmt: skip
        labels = await system.cliques()
        assert replacement.spec.node_name != victim
        assert labels[replacement.spec.node_name] == clique
        assert {labels[pod.spec.node_name] for pod in replaced} == {clique}
        assert (after.status.clique, after.status.channel) == (clique, before.status.channel)
        assert victim not in {node.name for node in after.status.nodes}
        # The replacement was placed while the fault still held: the node is still tainted.
        assert taint_effect(await system.node(victim)) == "NoExecute"

        await inject(system, victim, None)

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
