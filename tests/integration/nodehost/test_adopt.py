"""The node host's IMEX daemons outlive their agents: a node whose services are killed and
start again keeps its daemon (the same instance, which its peers see as no restart), the new
agent adopts it, and the node's ``cdo.dev/ImexReady`` never leaves True."""

from __future__ import annotations

from shared.crds.names import IMEX_READY_CONDITION
from shared.events import Event, NodeImexState
from tests.conftest import BusFactory
from tests.integration.nodehost.conftest import Hosted
from tests.support.wait import wait_for


async def test_killed_services_come_back_and_adopt_the_running_daemon(
    hosted: Hosted, bus_factory: BusFactory
) -> None:
    await hosted.settled()
    victim = hosted.host[hosted.names[0]]
    peers = [node for node in hosted.host if node.topology.clique == victim.topology.clique]
    await wait_for(
        lambda: all(node.agent is not None and node.agent.ready for node in hosted.host),
        timeout=30,
        what="every agent ready",
    )
    started = {node.name: node.imex.started for node in hosted.host}
    assert all(len(instances) == 1 for instances in started.values()), started
    before = (await hosted.node(victim.name)).condition(IMEX_READY_CONDITION)
    assert before is not None and before.status == "True"
    old_agent = victim.agent
    states: list[str] = []

    async def on_state(event: Event) -> None:
        if isinstance(event, NodeImexState) and event.node == victim.name:
            states.append(event.daemon_state)

    listener = await bus_factory("listener")
    await listener.subscribe(f"cdo.v1.node.{victim.name}.imex", on_state)
    await listener.nc.flush()

    victim.kill_services()

    def back() -> bool:
        agent = victim.agent
        return (
            victim.sessions == 2
            and victim.state == "running"
            and agent is not None
            and agent is not old_agent
            and agent.ready
        )

    await wait_for(back, timeout=30, what="the node's services back, IMEX ready")
    agent = victim.agent
    assert agent is not None
    assert agent.controller.adopted, "the new agent adopted the daemon"
    assert agent.controller.restarts == 0
    assert victim.imex.started == started[victim.name], "no new daemon on the node"
    assert victim.imex.running == 1
    assert victim.restarts == 1 and "were killed" in victim.last_error
    for node in peers:
        assert node.imex.started == started[node.name], f"{node.name} restarted its daemon"
    after = (await hosted.node(victim.name)).condition(IMEX_READY_CONDITION)
    assert after is not None and after.status == "True"
    assert after.last_transition_time == before.last_transition_time
    await wait_for(lambda: bool(states), timeout=10, what="the new agent's first report")
    assert set(states) == {"READY"}, states
    history = [event.daemon_state for event in agent.reporter.history]
    assert history and set(history) == {"READY"}, "the new agent never saw its daemon not READY"
