"""The agents of one clique run its IMEX domain: simulated nvidia-imex daemons as subprocesses.

Three nodes of one rack (one clique), each with its agent in this process and its daemon as a
child process on the node's own loopback address; the API emulator and a real nats-server.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from services.imex_agent import ImexAgent
from services.imex_agent.hostsfile import parse_block
from services.imex_agent.roster import slot_hostname, slot_hostnames
from shared.events import Event, NodeImexState
from shared.nvml import PlatformInfo, PynvmlNvml
from tests.conftest import BusFactory
from tests.integration.imex.pki import Authority
from tests.integration.imex_agent.harness import ImexCluster, SimNode
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow


def rack(cluster: ImexCluster, name: str = "rack-0") -> list[SimNode]:
    return [node for node in cluster.node_list() if node.topology.rack == name]


async def start_all(cluster: ImexCluster, nodes: Sequence[SimNode]) -> None:
    for node in nodes:
        await cluster.register(node)
    for node in nodes:
        await cluster.start(node)


def agent(node: SimNode) -> ImexAgent:
    assert node.agent is not None
    return node.agent


async def all_up(cluster: ImexCluster, nodes: Sequence[SimNode], *, within: float = 30) -> None:
    """Every node READY, Domain UP, connected to exactly the others."""

    def up() -> bool:
        cluster.check_agents()
        for node in nodes:
            event = agent(node).reporter.event
            if event is None or event.domain_state != "UP" or event.daemon_state != "READY":
                return False
            peers = {peer.node: peer.state for peer in event.peers}
            if peers != {other.name: "CONNECTED" for other in nodes if other is not node}:
                return False
        return True

    await wait_for(up, timeout=within, interval=0.1, what="every node READY with domain UP")


class Collector:
    """NodeImexState events as a subscriber sees them, per node, in order."""

    def __init__(self) -> None:
        self.events: dict[str, list[NodeImexState]] = {}

    async def __call__(self, event: Event) -> None:
        if isinstance(event, NodeImexState):
            self.events.setdefault(event.node, []).append(event)

    def domain_states(self, node: str) -> list[str]:
        return [event.domain_state for event in self.events.get(node, [])]


async def test_three_nodes_render_the_same_map_and_reach_domain_up(
    cluster: ImexCluster, bus_factory: BusFactory
) -> None:
    watcher = await bus_factory("watcher")
    seen = Collector()
    await watcher.subscribe(NodeImexState.subject_template.wildcard(), seen)
    nodes = rack(cluster)
    await start_all(cluster, nodes)
    await all_up(cluster, nodes)

    maps = {node.nodes_config() for node in nodes}
    assert len(maps) == 1, "every member renders byte-identical nodes_config.cfg"
    clique = nodes[0].topology.clique
    entries = [line for line in maps.pop().splitlines() if not line.startswith("#")]
    assert entries == list(slot_hostnames(clique, 18)), "every slot of the rack, held or not"
    held = {slot_hostname(clique, other.topology.tray_index): other.address for other in nodes}
    for node in nodes:
        hosts = parse_block(node.hosts_file.read_text())
        assert hosts == {name: held.get(name, "127.255.255.254") for name in entries}

    async def conditions_true() -> bool:
        return all([await cluster.condition(n.name) == ("True", "ImexReady") for n in nodes])

    await wait_for(conditions_true, timeout=10, what="cdo.dev/ImexReady=True on every node")
    for node in nodes:
        annotations = (await cluster.node_object(node.name)).metadata.annotations
        assert annotations["cdo.dev/imex-slot"] == str(node.topology.tray_index)
        assert annotations["cdo.dev/imex-slot-source"] == "platform"
        assert annotations["cdo.dev/imex-address"] == node.address

    def published_up() -> bool:
        return all("UP" in seen.domain_states(node.name) for node in nodes)

    await wait_for(published_up, timeout=10, what="NodeImexState UP published for every node")
    for node in nodes:
        assert node.bus is not None
        await node.bus.flush()  # the bus's root task writes snapshots in a service
    snapshots = await watcher.snapshots("v1.node.*.imex")
    latest = {event.node: event for event in snapshots if isinstance(event, NodeImexState)}
    assert {name: event.daemon_state for name, event in latest.items()} == {
        node.name: "READY" for node in nodes
    }
    assert len({event.config_digest for event in latest.values()}) == 1


async def test_killed_daemon_is_restarted_and_peers_see_degraded_then_up(
    cluster: ImexCluster,
) -> None:
    nodes = rack(cluster)
    victim, *others = nodes
    # A visible gap before the restart, so the peers' DEGRADED view cannot be missed.
    victim.imex_overrides = {"restart_backoff_initial_s": 3.0}
    await start_all(cluster, nodes)
    await all_up(cluster, nodes)
    restarts_before = agent(victim).controller.restarts
    peer_restarts = [agent(node).controller.restarts for node in others]
    pid = agent(victim).controller.pid
    assert pid is not None
    marks = {node.name: len(agent(node).reporter.history) for node in nodes}

    os.kill(pid, signal.SIGKILL)

    def since_kill(node: SimNode) -> list[NodeImexState]:
        return agent(node).reporter.history[marks[node.name] :]

    def victim_back() -> bool:
        cluster.check_agents()
        states = [(e.daemon_state, e.domain_state, e.restarts) for e in since_kill(victim)]
        return bool(states) and states[-1] == ("READY", "UP", restarts_before + 1)

    await wait_for(victim_back, timeout=30, interval=0.1, what="the victim restarted and UP")
    assert agent(victim).controller.pid not in (None, pid)

    def degraded_then_up(node: SimNode) -> bool:
        states = [event.domain_state for event in since_kill(node)]
        return "DEGRADED" in states and states[-1] == "UP"

    await wait_for(
        lambda: all(degraded_then_up(node) for node in others),
        timeout=30,
        interval=0.1,
        what="every peer DEGRADED, then UP",
    )
    assert [agent(node).controller.restarts for node in others] == peer_restarts


async def test_node_replaced_in_its_slot_is_picked_up_without_restarting_peers(
    cluster: ImexCluster,
) -> None:
    nodes = rack(cluster)
    stay, leaving = nodes[:2], nodes[2]
    await start_all(cluster, nodes)
    await all_up(cluster, nodes)
    clique = leaving.topology.clique
    # The replacement: another tray 2, joined to this clique's NVLink partition.
    newcomer = next(n for n in rack(cluster, "rack-1") if n.topology.tray_index == 2)
    newcomer.nvml.set_fabric(
        cluster_uuid=leaving.topology.cluster_uuid, clique_id=leaving.topology.clique_id
    )
    pids = [agent(node).controller.pid for node in stay]
    restarts = [agent(node).controller.restarts for node in stay]
    reloads = [agent(node).controller.reloads for node in stay]

    # The new node comes up while the old one still holds slot 2: it waits, it does not fight.
    await cluster.register(newcomer, clique=clique)  # as the health monitor would label it
    await cluster.start(newcomer)

    def waiting() -> bool:
        state = agent(newcomer).controller.state
        return state.phase.value == "NotInRoster" and "slot 2 is held" in state.detail

    await wait_for(waiting, timeout=15, what="the newcomer waiting for slot 2")
    await cluster.stop(leaving)
    await cluster.label(leaving, None)

    replaced = [*stay, newcomer]
    await all_up(cluster, replaced)
    assert [agent(node).controller.pid for node in stay] == pids
    assert [agent(node).controller.restarts for node in stay] == restarts
    assert all(
        agent(node).controller.reloads > before for node, before in zip(stay, reloads, strict=True)
    )
    assert {node.nodes_config() for node in replaced} == {leaving.nodes_config()}
    for node in stay:
        hosts = parse_block(node.hosts_file.read_text())
        assert hosts[slot_hostname(clique, 2)] == newcomer.address


async def test_a_node_that_joins_the_clique_is_picked_up_without_a_restart(
    cluster: ImexCluster,
) -> None:
    nodes = rack(cluster)
    first, late = nodes[:2], nodes[2]
    await start_all(cluster, first)
    await all_up(cluster, first)
    maps = {node.nodes_config() for node in first}
    await cluster.register(late)
    await cluster.start(late)
    await all_up(cluster, nodes)
    # The map lists every slot from the start: the join only re-pointed the late node's name.
    assert {node.nodes_config() for node in nodes} == maps
    assert [agent(node).controller.restarts for node in first] == [0, 0]
    assert [node.started_pids for node in first] == [[pid] for pid in node_pids(first)]


def node_pids(nodes: Sequence[SimNode]) -> list[int]:
    pids = [agent(node).controller.pid for node in nodes]
    assert None not in pids
    return [pid for pid in pids if pid is not None]


async def test_existing_imex_daemon_is_detected_reported_and_left_alone(
    cluster: ImexCluster, tmp_path: Path
) -> None:
    node = rack(cluster)[0]
    config = tmp_path / "host-imex" / "config.cfg"
    config.parent.mkdir()
    (config.parent / "nodes_config.cfg").write_text(f"{node.address}\n")
    config.write_text(
        "DAEMONIZE=0\n"
        f"BIND_INTERFACE_IP={node.address}\nSERVER_PORT={cluster.peer_port}\n"
        f"IMEX_CMD_ENABLED=1\nIMEX_CMD_BIND_INTERFACE_IP={node.address}\n"
        f"IMEX_CMD_PORT={cluster.cmd_port}\nIMEX_NODE_CONFIG_FILE=nodes_config.cfg\n"
    )
    host_daemon = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sim.imex.daemon",
        "-c",
        str(config),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        await wait_for(
            lambda: _answers(node.address, cluster.cmd_port), timeout=10, what="host daemon up"
        )
        await start_all(cluster, [node])

        async def reported() -> bool:
            cluster.check_agents()
            return await cluster.condition(node.name) == ("False", "ForeignImexDaemon")

        await wait_for(reported, timeout=15, what="ForeignImexDaemon reported")
        controller = agent(node).controller
        assert controller.pid is None
        assert not agent(node).reporter.ready
        event = agent(node).reporter.event
        assert event is not None
        assert event.daemon_state == "NOT_RUNNING"
        assert not (node.imex_dir / "nvidia-imex.pid").exists()
        assert host_daemon.returncode is None, "the host's daemon is not touched"
        message = (await cluster.node_object(node.name)).condition("cdo.dev/ImexReady")
        assert message is not None
        assert node.address in message.message
    finally:
        host_daemon.terminate()
        await host_daemon.wait()
    # Once the host's daemon is gone, the agent runs its own.
    await all_up(cluster, [node])
    assert agent(node).reporter.ready

    async def ready_condition() -> bool:
        return await cluster.condition(node.name) == ("True", "ImexReady")

    await wait_for(ready_condition, timeout=10, what="cdo.dev/ImexReady=True")


async def _answers(address: str, port: int) -> bool:
    try:
        _reader, writer = await asyncio.open_connection(address, port)
    except OSError:
        return False
    writer.close()
    await writer.wait_closed()
    return True


class NoPlatformInfo(PynvmlNvml):
    """A node whose platform does not report tray placement (NVML answers NOT_SUPPORTED)."""

    def platform_info(self, gpu: int) -> PlatformInfo | None:
        return None


async def test_nodes_without_platform_info_claim_distinct_slots(cluster: ImexCluster) -> None:
    nodes = rack(cluster)
    for node in nodes:
        node.nvml_handle = NoPlatformInfo()
    await start_all(cluster, nodes)
    await all_up(cluster, nodes, within=40)
    slots = set()
    for node in nodes:
        annotations = (await cluster.node_object(node.name)).metadata.annotations
        assert annotations["cdo.dev/imex-slot-source"] == "claimed"
        slots.add(int(annotations["cdo.dev/imex-slot"]))
    assert slots == {0, 1, 2}
    assert len({node.nodes_config() for node in nodes}) == 1


async def test_peers_talk_mutual_tls_with_the_mounted_secret(
    cluster: ImexCluster, tmp_path: Path
) -> None:
    nodes = rack(cluster)
    authority = Authority(tmp_path / "ca", "cdo imex test")
    for node in nodes:
        key, cert = authority.issue(node.address)
        secret = node.root / "tls"
        secret.mkdir()
        (secret / "tls.key").write_bytes(key.read_bytes())
        (secret / "tls.crt").write_bytes(cert.read_bytes())
        (secret / "ca.crt").write_bytes(authority.cert_path.read_bytes())
        node.imex_overrides = {"tls_dir": str(secret)}
    await start_all(cluster, nodes)
    await all_up(cluster, nodes, within=40)
    config = (nodes[0].imex_dir / "config.cfg").read_text()
    assert "IMEX_ENABLE_AUTH_ENCRYPTION=1" in config
    assert "IMEX_AUTH_ENCRYPTION_MODE=SSL_TLS" in config
