"""The node host runs every node's IMEX agent and health monitor against the simulated cluster:
monitors label the nodes with their cliques, agents bring IMEX up in each clique, a fault
injected through the control API taints the node and is announced on NATS, and the cluster's
power switch stops and restarts a node's services."""

from __future__ import annotations

from typing import Any

from shared.bus import EventBus
from shared.crds.names import GPU_FAULT_TAINT, IMEX_READY_CONDITION
from shared.events import Event, NodeFault, NodeImexState, NodeRecovered
from tests.conftest import BusFactory
from tests.integration.nodehost.conftest import Hosted
from tests.support.wait import wait_for


async def collect(bus: EventBus, pattern: str) -> list[Event]:
    events: list[Event] = []

    async def handler(event: Event) -> None:
        events.append(event)

    await bus.subscribe(pattern, handler)
    return events


async def test_hosted_services_label_nodes_and_bring_imex_up(
    hosted: Hosted, bus_factory: BusFactory
) -> None:
    await hosted.settled()
    listener = await bus_factory("listener")

    async def domains_up() -> dict[str, NodeImexState] | None:
        latest = {
            event.node: event
            for event in await listener.snapshots("v1.node.*.imex")
            if isinstance(event, NodeImexState)
        }
        up = {name: event for name, event in latest.items() if event.domain_state == "UP"}
        return up if set(up) == set(hosted.names) else None

    states = await wait_for(domains_up, timeout=30, interval=0.2, what="every node's domain UP")
    for topology in hosted.cluster.topology.nodes:
        state = states[topology.name]
        assert state.clique == topology.clique
        assert state.source == f"cdo/imex-agent/{topology.name}"
        peers = {peer.node for peer in state.peers}
        same_clique = {
            other.name
            for other in hosted.cluster.topology.nodes
            if other.clique == topology.clique and other.name != topology.name
        }
        assert peers == same_clique  # one IMEX domain per clique, never across racks

    status, nodes = await hosted.control("GET", "/nodes")
    assert status == 200
    assert isinstance(nodes, list)
    assert {entry["name"] for entry in nodes} == set(hosted.names)
    assert all(entry["state"] == "running" and entry["imex_ready"] for entry in nodes)
    await wait_for(lambda: hosted.host.ready, what="node host ready")

    name = hosted.names[0]
    async with hosted.http.get(f"{hosted.control_url}/nodes/{name}/metrics/health-monitor") as r:
        assert r.status == 200
        assert "cdo_health_readings_total" in await r.text()


async def test_a_fault_through_the_control_api_taints_the_node_and_is_announced(
    hosted: Hosted, bus_factory: BusFactory
) -> None:
    await hosted.settled()
    listener = await bus_factory("listener")
    events = await collect(listener, "cdo.v1.node.*.>")
    victim = hosted.names[1]

    status, answer = await hosted.control(
        "POST", f"/nodes/{victim}/faults", {"kind": "xid", "gpu": 1, "xid": 74}
    )  # an NVLink error: node-level (XID 79 would be confined to GPU 1)
    assert status == 200, answer

    async def taint_effect() -> str | None:
        node = await hosted.node(victim)
        taint = next((t for t in node.spec.taints if t.key == GPU_FAULT_TAINT), None)
        return None if taint is None else taint.effect

    assert await wait_for(taint_effect, what="the fault taint") == "NoExecute"

    def fault() -> NodeFault | None:
        return next(
            (e for e in events if isinstance(e, NodeFault) and e.node == victim and e.code == 74),
            None,
        )

    announced = await wait_for(fault, what="the NodeFault event")
    assert announced.severity == "fatal"
    assert announced.source == f"cdo/health-monitor/{victim}"
    assert announced.gpus == (hosted.host[victim].topology.gpus[1].uuid,)

    # The XID latch and the hold-down are short here: the node recovers by itself.
    async def untainted() -> bool:
        return await taint_effect() is None

    await wait_for(untainted, timeout=15, what="the taint removed after the hold-down")
    await wait_for(
        lambda: any(isinstance(e, NodeRecovered) and e.node == victim for e in events),
        what="the NodeRecovered event",
    )


async def test_the_control_api_refuses_what_it_cannot_do(hosted: Hosted) -> None:
    name = hosted.names[0]
    cases: list[tuple[str, str, Any, int]] = [
        ("POST", "/nodes/no-such-node/faults", {"kind": "xid", "xid": 79}, 404),
        ("POST", f"/nodes/{name}/faults", {"kind": "xid", "gpu": 9, "xid": 79}, 400),
        ("POST", f"/nodes/{name}/faults", {"kind": "meteor"}, 400),
        ("POST", f"/nodes/{name}/faults", {"kind": "nvlink", "gpu": 0, "link": 99}, 400),
        ("GET", f"/nodes/{name}/metrics/kubelet", None, 404),
    ]
    for method, path, body, expected in cases:
        status, answer = await hosted.control(method, path, body)
        assert status == expected, (path, answer)
        assert isinstance(answer, dict) and answer["error"]
    status, answer = await hosted.control("DELETE", f"/nodes/{name}/faults")
    assert status == 200 and answer == {"node": name, "applied": "every GPU healthy"}


async def test_power_off_stops_a_nodes_services_and_power_on_restarts_them(
    hosted: Hosted, bus_factory: BusFactory
) -> None:
    await hosted.settled()
    victim = hosted.names[0]
    peer = next(
        node.name
        for node in hosted.cluster.topology.nodes
        if node.clique == hosted.host[victim].topology.clique and node.name != victim
    )
    listener = await bus_factory("listener")
    events = await collect(listener, "cdo.v1.node.*.imex")

    async def peer_up() -> bool:
        # ImexReady only says the peer's own daemon runs; wait for the domain itself.
        latest = [
            e
            for e in await listener.snapshots(f"v1.node.{peer}.imex")
            if isinstance(e, NodeImexState)
        ]
        return bool(latest) and latest[-1].domain_state == "UP"

    await wait_for(peer_up, timeout=30, interval=0.2, what="the peer's IMEX domain UP")
    hosted.host[victim].nvml.raise_xid(0, 13)  # queued; a power cycle must not keep faults
    hosted.host[victim].nvml.set_gpu_lost(2)

    hosted.cluster.power_off(victim)
    await wait_for(
        lambda: hosted.host[victim].state == "off" and hosted.host[victim].imex.running == 0,
        what="the node's services stopped",
    )
    # Its daemon died without a goodbye: the peer's view of the domain degrades.
    await wait_for(
        lambda: any(
            isinstance(e, NodeImexState) and e.node == peer and e.domain_state != "UP"
            for e in events
        ),
        timeout=20,
        what="the peer seeing the domain degraded",
    )
    status, entry = await hosted.control("GET", f"/nodes/{victim}")
    assert status == 200 and isinstance(entry, dict)
    assert entry["powered"] is False and entry["state"] == "off"

    hosted.cluster.power_on(victim)
    await wait_for(lambda: hosted.host[victim].ready, timeout=30, what="services back")

    async def imex_ready() -> bool:
        condition = (await hosted.node(victim)).condition(IMEX_READY_CONDITION)
        return condition is not None and condition.status == "True"

    await wait_for(imex_ready, timeout=30, what="ImexReady again")
    assert hosted.host[victim].restarts == 0  # a power cycle is no failure
    assert not hosted.host[victim].nvml.gpus[2].lost


async def test_a_gpu_fault_and_reset_restart_no_imex_daemon_and_readiness_never_drops(
    hosted: Hosted, bus_factory: BusFactory
) -> None:
    """The demo's fault act in small: an XID and the GPU reset on one node. Nothing of it
    reaches IMEX; no daemon of any node restarts, from the first start on (the bring-up
    included), and no node's IMEX readiness falls once it rose."""
    await hosted.settled()
    listener = await bus_factory("listener")

    async def every_domain_up() -> bool:
        latest = {
            event.node: event
            for event in await listener.snapshots("v1.node.*.imex")
            if isinstance(event, NodeImexState)
        }
        return set(latest) == set(hosted.names) and all(
            event.domain_state == "UP" for event in latest.values()
        )

    await wait_for(every_domain_up, timeout=30, interval=0.2, what="every node's domain UP")
    events = await collect(listener, "cdo.v1.node.*.>")
    victim = hosted.names[1]

    status, answer = await hosted.control(
        "POST", f"/nodes/{victim}/faults", {"kind": "xid", "gpu": 0, "xid": 79}
    )
    assert status == 200, answer
    await wait_for(
        lambda: any(isinstance(e, NodeFault) and e.node == victim for e in events),
        what="the NodeFault event",
    )
    status, answer = await hosted.control("DELETE", f"/nodes/{victim}/faults")  # the GPU reset
    assert status == 200, answer
    await wait_for(
        lambda: any(isinstance(e, NodeRecovered) and e.node == victim for e in events),
        timeout=20,
        what="the NodeRecovered event",
    )
    await wait_for(every_domain_up, timeout=30, interval=0.2, what="every node's domain UP")

    for node in hosted.host:
        assert node.restarts == 0, f"{node.name}'s services restarted"
        assert len(node.imex.started) == 1, f"{node.name} started {node.imex.started}"
        assert node.agent is not None
        assert node.agent.controller.restarts == 0
        states = [event.daemon_state for event in node.agent.reporter.history]
        first = states.index("READY")
        assert set(states[first:]) == {"READY"}, f"{node.name}: {states}"
        condition = (await hosted.node(node.name)).condition(IMEX_READY_CONDITION)
        assert condition is not None and condition.status == "True"
    assert not [e for e in events if isinstance(e, NodeImexState) and e.daemon_state != "READY"], (
        "no node reported its daemon anything but READY"
    )
