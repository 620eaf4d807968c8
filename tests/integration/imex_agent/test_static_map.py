"""A static node map: bring-up and churn restart no daemon, and prepared claims stay intact.

Agents in this process, each driving its simulated ``nvidia-imex`` as a real child process (the
ctl's questions asked in process, :class:`harness.ProcessDaemonImex`). Restarts are counted two
ways: the agents' own counters (``controller.restarts``, ``cdo_imex_daemon_starts_total``) and
the pids of the daemons each node's agents started (``SimNode.started_pids``).

- an 18-node clique whose agents all start at once (as a node host or a DaemonSet rollout
  starts them): one daemon per node, ever, and every node's IMEX readiness rises once and
  stays (the bring-up restarts behind the demo's readiness drop, docs/imex-agent.md);
- on a partial rack (6 of 18 slots: the empty ones point at the sentinel): a node leaving and
  rejoining, a fabric fault and its recovery, a power cycle. No other node's daemon restarts,
  and every other node's channel, CDI spec and checkpointed claim are untouched.
"""

from __future__ import annotations

import itertools
import os
import signal
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import pynvml
import pytest

from services.imex_agent import ImexAgent
from services.imex_agent.hostsfile import parse_block
from services.imex_agent.roster import slot_hostname, slot_hostnames
from shared.kube.client import KubeClient
from shared.kubeletapi import Claim
from tests.conftest import BusFactory
from tests.integration.imex_agent.harness import (
    ImexCluster,
    SimNode,
    create_claim,
    create_domain,
    imex_cluster,
    install,
    random_topology,
)
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

SENTINEL = "127.255.255.254"
CHANNEL = 7
# Slower polls than the other tests: many agents share two cores here.
CALM = {"poll_interval_s": 2.0, "fast_poll_interval_s": 0.5, "fast_poll_window_s": 3.0}


def agent(node: SimNode) -> ImexAgent:
    assert node.agent is not None
    return node.agent


async def make_rack(
    client: KubeClient,
    bus_factory: BusFactory,
    root_factory: Callable[[], Path],
    work: Path,
    *,
    nodes: int,
) -> AsyncIterator[ImexCluster]:
    await install(client)
    async with imex_cluster(
        client=client,
        bus_factory=bus_factory,
        topology=random_topology(racks=1, nodes=nodes),
        root_factory=root_factory,
        work=work,
    ) as cluster:
        for node in cluster.node_list():
            node.ctl_in_process = True
            node.imex_overrides = dict(CALM)
        yield cluster


@pytest.fixture
async def rack18(
    kube_client: KubeClient,
    bus_factory: BusFactory,
    short_root: Callable[[], Path],
    tmp_path: Path,
) -> AsyncIterator[ImexCluster]:
    async for cluster in make_rack(kube_client, bus_factory, short_root, tmp_path, nodes=18):
        yield cluster


@pytest.fixture
async def rack6(
    kube_client: KubeClient,
    bus_factory: BusFactory,
    short_root: Callable[[], Path],
    tmp_path: Path,
) -> AsyncIterator[ImexCluster]:
    async for cluster in make_rack(kube_client, bus_factory, short_root, tmp_path, nodes=6):
        yield cluster


async def start_at_once(cluster: ImexCluster, nodes: Sequence[SimNode]) -> None:
    for node in nodes:
        await cluster.register(node)
    for node in nodes:
        await cluster.start(node)


async def all_up(cluster: ImexCluster, nodes: Sequence[SimNode], *, within: float) -> None:
    """Every node READY and Domain UP, connected to exactly the others of ``nodes``."""

    def up() -> bool:
        cluster.check_agents()
        for node in nodes:
            event = agent(node).reporter.event if node.agent is not None else None
            if event is None or (event.daemon_state, event.domain_state) != ("READY", "UP"):
                return False
            peers = {peer.node: peer.state for peer in event.peers}
            if peers != {other.name: "CONNECTED" for other in nodes if other is not node}:
                return False
        return True

    await wait_for(up, timeout=within, interval=0.2, what="every node READY with domain UP")


def ready_flaps(node: SimNode) -> int:
    """How often the node's reported daemon state fell from READY (after it first was)."""
    states = [event.daemon_state for event in agent(node).reporter.history]
    return sum(
        1 for before, after in itertools.pairwise(states) if before == "READY" and after != "READY"
    )


def starts(node: SimNode) -> dict[str, float]:
    """cdo_imex_daemon_starts_total by reason, from the agent's own metrics."""
    text = node.metrics.exposition().decode()
    counts: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("cdo_imex_daemon_starts_total{"):
            labels, _, value = line.partition("} ")
            reason = labels.split('reason="', 1)[1].split('"', 1)[0]
            counts[reason] = float(value)
    return counts


def mapping(node: SimNode) -> dict[str, str]:
    return parse_block(node.hosts_file.read_text())


async def test_an_18_node_clique_comes_up_with_one_daemon_per_node_and_no_flap(
    rack18: ImexCluster,
) -> None:
    nodes = rack18.node_list()
    await start_at_once(rack18, nodes)
    await all_up(rack18, nodes, within=120)

    clique = nodes[0].topology.clique
    assert {node.nodes_config() for node in nodes} == {nodes[0].nodes_config()}
    entries = [line for line in nodes[0].nodes_config().splitlines() if not line.startswith("#")]
    assert entries == list(slot_hostnames(clique, 18))
    full = {slot_hostname(clique, n.topology.tray_index): n.address for n in nodes}
    for node in nodes:
        assert mapping(node) == full
        assert len(node.started_pids) == 1, f"{node.name} started {node.started_pids}"
        assert agent(node).controller.pid == node.started_pids[0]
        assert agent(node).controller.restarts == 0
        assert starts(node) == {"initial": 1.0}
        assert ready_flaps(node) == 0

    async def conditions_true() -> bool:
        return all([await rack18.condition(n.name) == ("True", "ImexReady") for n in nodes])

    await wait_for(conditions_true, timeout=20, what="cdo.dev/ImexReady=True on every node")


# -- churn on a partial rack --------------------------------------------------------------------


class Prepared:
    """One claim prepared on each node of the rack (one domain, one channel)."""

    def __init__(self, cluster: ImexCluster, claims: dict[str, Claim], ids: dict[str, list[str]]):
        self.cluster = cluster
        self.claims = claims
        self.ids = ids

    async def intact(self, node: SimNode) -> None:
        """The node's channel device, CDI spec and checkpoint record are still there, and the
        kubelet repeating the prepare gets the same answer."""
        claim = self.claims[node.name]
        assert (node.device_root / f"channel{CHANNEL}").exists(), node.name
        assert (node.cdi_root / f"cdo.dev-imex-channel_{claim.uid}.json").exists(), node.name
        checkpoint = node.kubelet_root / "plugins" / "compute-domain.cdo.dev" / "checkpoint.json"
        assert claim.uid in checkpoint.read_text(), node.name
        plugin = await self.cluster.plugin(node)
        (result,) = (await plugin.prepare([claim])).values()
        assert result.ok, result.error
        assert list(result.cdi_device_ids) == self.ids[node.name]


async def prepare_everywhere(cluster: ImexCluster, nodes: Sequence[SimNode]) -> Prepared:
    clique = nodes[0].topology.clique
    domain = await create_domain(
        cluster.client, namespace="churn", name="job", channel=CHANNEL, clique=clique
    )
    claims: dict[str, Claim] = {}
    ids: dict[str, list[str]] = {}
    for node in nodes:
        claim = await create_claim(
            cluster.client, namespace="churn", name=f"c-{node.name}", domain=domain, node=node.name
        )
        plugin = await cluster.plugin(node)
        (result,) = (await plugin.prepare([claim])).values()
        assert result.ok, result.error
        claims[node.name] = claim
        ids[node.name] = list(result.cdi_device_ids)
    return Prepared(cluster, claims, ids)


class Baseline:
    """What the untouched nodes looked like before the churn."""

    def __init__(self, nodes: Sequence[SimNode]) -> None:
        self.nodes = list(nodes)
        self.pids = {node.name: list(node.started_pids) for node in nodes}
        self.reloads = {node.name: agent(node).controller.reloads for node in nodes}

    def unchanged(self) -> None:
        for node in self.nodes:
            assert node.started_pids == self.pids[node.name], f"{node.name} restarted its daemon"
            assert agent(node).controller.pid == node.started_pids[-1]
            assert agent(node).controller.restarts == 0, node.name
            assert starts(node) == {"initial": 1.0}, node.name
            assert ready_flaps(node) == 0, node.name

    def reloaded(self) -> bool:
        return all(agent(n).controller.reloads > self.reloads[n.name] for n in self.nodes)


async def partial_rack(cluster: ImexCluster) -> tuple[list[SimNode], Prepared]:
    nodes = cluster.node_list()
    await start_at_once(cluster, nodes)
    await all_up(cluster, nodes, within=60)
    clique = nodes[0].topology.clique
    for node in nodes:
        hosts = mapping(node)
        assert len(hosts) == 18
        assert [hosts[slot_hostname(clique, slot)] for slot in range(6, 18)] == [SENTINEL] * 12
    return nodes, await prepare_everywhere(cluster, nodes)


def slot_points_at(nodes: Sequence[SimNode], victim: SimNode, address: str) -> Callable[[], bool]:
    name = slot_hostname(victim.topology.clique, victim.topology.tray_index)
    return lambda: all(mapping(node)[name] == address for node in nodes)


async def test_a_node_leaving_and_rejoining_restarts_no_other_daemon(rack6: ImexCluster) -> None:
    nodes, prepared = await partial_rack(rack6)
    victim, others = nodes[2], [n for n in nodes if n is not nodes[2]]
    baseline = Baseline(others)

    await rack6.stop(victim)  # its agent goes, and its daemon with it
    await rack6.label(victim, None)  # and the node leaves the clique
    await wait_for(slot_points_at(others, victim, SENTINEL), timeout=15, what="slot emptied")
    await all_up(rack6, others, within=30)  # UP over the members: the empty slot is no member
    await wait_for(baseline.reloaded, timeout=15, what="SIGUSR1 on every other node")

    await rack6.label(victim, victim.topology.clique)
    await rack6.start(victim)
    await wait_for(slot_points_at(others, victim, victim.address), timeout=15, what="slot back")
    await all_up(rack6, nodes, within=30)

    baseline.unchanged()
    for node in nodes:
        await prepared.intact(node)


async def test_a_fabric_fault_and_its_recovery_restart_no_daemon(rack6: ImexCluster) -> None:
    nodes, prepared = await partial_rack(rack6)
    victim, others = nodes[3], [n for n in nodes if n is not nodes[3]]
    baseline = Baseline(others)
    victim_pids = list(victim.started_pids)

    # The fabric goes: NVML reports the registration in progress, the health monitor takes the
    # clique label away.
    victim.nvml.set_fabric(state=pynvml.NVML_GPU_FABRIC_STATE_IN_PROGRESS)
    await rack6.label(victim, None)
    await wait_for(lambda: agent(victim).clique is None, timeout=15, what="victim sees no clique")
    await wait_for(slot_points_at(others, victim, SENTINEL), timeout=15, what="slot emptied")
    await all_up(rack6, others, within=30)
    await wait_for(baseline.reloaded, timeout=15, what="SIGUSR1 on every other node")
    # The victim's own daemon is held for the leave grace, not stopped.
    assert agent(victim).controller.holding
    assert agent(victim).controller.running

    victim.nvml.reset_fabric()
    await rack6.label(victim, victim.topology.clique)
    await wait_for(slot_points_at(others, victim, victim.address), timeout=15, what="slot back")
    await all_up(rack6, nodes, within=30)

    baseline.unchanged()
    assert victim.started_pids == victim_pids, "the victim's daemon outlived the fault too"
    assert not agent(victim).controller.holding
    for node in nodes:
        await prepared.intact(node)


async def test_a_power_cycle_restarts_no_other_daemon(rack6: ImexCluster) -> None:
    nodes, prepared = await partial_rack(rack6)
    victim, others = nodes[1], [n for n in nodes if n is not nodes[1]]
    baseline = Baseline(others)
    first_pid = victim.started_pids[-1]

    # Power off: the daemon dies without a goodbye and the agent with it; the Node keeps its
    # label and annotations (nobody is left on the node to change them).
    os.kill(first_pid, signal.SIGKILL)
    await rack6.stop(victim)

    def peers_see_it_down() -> bool:
        for node in others:
            event = agent(node).reporter.event
            if event is None:
                return False
            states = {peer.node: peer.state for peer in event.peers}
            if states.get(victim.name) == "CONNECTED":
                return False
        return True

    await wait_for(peers_see_it_down, timeout=20, what="the peers see the victim down")

    # Power on: a fresh agent, a new daemon; the others reconnect to the same name.
    await rack6.start(victim)
    await all_up(rack6, nodes, within=40)

    baseline.unchanged()
    assert victim.started_pids[0] == first_pid and len(victim.started_pids) == 2
    assert agent(victim).controller.restarts == 0, "a fresh agent's first start"
    for node in nodes:
        await prepared.intact(node)
