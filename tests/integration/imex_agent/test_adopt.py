"""IMEX outlives its agent: a restarted agent adopts the running daemon instead of starting one.

Real processes throughout: the simulated ``nvidia-imex`` daemons, the API emulator, a real
nats-server; the agent itself as a process where it is SIGKILLed (``python -m
services.imex_agent`` through the test launcher that binds the node's simulated NVML), the
domain controller as a process, and the IMEX launcher as a process in the layout the DaemonSet
uses. Restarts are counted from the agents' own counters and logs and from the daemons' pids.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import urllib.request
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from services.imex_agent.daemon import digest, map_digest
from services.imex_agent.imexconfig import ImexPaths, render_config
from services.imex_agent.launchprotocol import SOCKET_VARIABLE
from services.imex_agent.preflight import (
    DaemonRecord,
    ProcessIdentity,
    process_start_time,
    read_process,
    read_record,
    write_record,
)
from services.imex_agent.roster import render_nodes_config
from shared.crds import COMPUTE_DOMAINS
from shared.crds.computedomain import ComputeDomain
from shared.crds.names import DRIVER_NAME, IMEX_READY_CONDITION
from shared.events import DomainMembershipChanged, Event, NodeImexState
from shared.kube.client import KubeClient
from shared.kube.resources import PODS
from shared.kubeletapi import Claim, KubeletApiError, PluginWatcher, PrepareResult
from sim.kubeapi import KubeServer
from sim.natsserver import free_port
from tests.conftest import BusFactory
from tests.integration.imex_agent.harness import (
    Domain,
    ImexCluster,
    SimNode,
    create_claim,
    create_domain,
    one_node_cluster,
    settings_env,
)
from tests.support.processes import ProgramProcess
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

RECORD = "nvidia-imex.pid"
DOMAIN_CONTROLLER_ENV = {
    "CDO_DOMAIN_CONTROLLER_LEASE_NAMESPACE": "default",
    "CDO_DOMAIN_CONTROLLER_INFORMER_BACKOFF_INITIAL_S": "0.05",
    "CDO_DOMAIN_CONTROLLER_INFORMER_BACKOFF_MAX_S": "0.5",
    "CDO_DOMAIN_CONTROLLER_RETRIES_BACKOFF_MAX_S": "0.5",
    "CDO_SHUTDOWN_STEP_TIMEOUT_S": "3",
}


@pytest.fixture
async def one_node(
    kube_client: KubeClient,
    bus_factory: BusFactory,
    short_root: Callable[[], Path],
    tmp_path: Path,
) -> AsyncIterator[tuple[ImexCluster, Path]]:
    """One registered node whose agents leave their daemon running when they go."""
    async with one_node_cluster(
        client=kube_client, bus_factory=bus_factory, root_factory=short_root, work=tmp_path
    ) as (cluster, topology_file):
        node = cluster.node_list()[0]
        node.imex_overrides["stop_on_exit"] = False
        await cluster.register(node)
        yield cluster, topology_file
    end_daemons(node)


def end_daemons(node: SimNode) -> None:
    """Kill what the test's agents left running (the record's daemon, the recorded starts)."""
    record = read_record(node.imex_dir / RECORD)
    pids = set(node.started_pids)
    if record is not None and record.process.pid is not None:
        pids.add(record.process.pid)
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)  # a daemon an in-process agent started is this process's child


def _alive(pid: int) -> bool:
    facts = read_process(pid)
    return facts is not None and facts.state != "Z"


def agent_process(
    node: SimNode,
    *,
    topology: Path,
    env: dict[str, str],
    emulator: KubeServer,
    run: int,
    **imex: Any,
) -> ProgramProcess:
    settings = node.settings()
    settings = msgspec.structs.replace(
        settings, api=msgspec.structs.replace(settings.api, kubeconfig=str(emulator.kubeconfig))
    )
    if imex:
        settings = msgspec.structs.replace(
            settings, imex=msgspec.structs.replace(settings.imex, **imex)
        )
    return ProgramProcess(
        "tests.integration.imex_agent.launch",
        str(topology),
        node.name,
        env={**env, **settings_env(settings), "CDO_INSTANCE": f"agent-{run}"},
        workdir=node.root,
        name=f"agent-{run}",
    )


def http_text(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=3) as response:
        text: str = response.read().decode()
        return text


def messages(process: ProgramProcess) -> list[str]:
    return [str(record.get("message", "")) for record in process.log_records()]


class Observed:
    """Every membership event of the domain and every IMEX state of the node, in order."""

    def __init__(self) -> None:
        self.phases: list[str] = []
        self.states: list[tuple[str, str]] = []

    async def handle(self, event: Event) -> None:
        if isinstance(event, DomainMembershipChanged):
            self.phases.append(event.phase)
        elif isinstance(event, NodeImexState):
            self.states.append((event.source.rsplit("/", 1)[-1], event.daemon_state))

    def since_ready(self) -> tuple[list[str], list[str]]:
        """The phases after the first Ready, and the daemon states after the first READY."""
        phases = self.phases[self.phases.index("Ready") :] if "Ready" in self.phases else []
        daemon = [state for _, state in self.states]
        states = daemon[daemon.index("READY") :] if "READY" in daemon else []
        return phases, states


async def run_pod(client: KubeClient, domain: Domain, *, pod: str, node: str) -> None:
    """The domain's pod on ``node``, running: what the kubelet reports once prepare succeeded."""
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod, "namespace": domain.namespace},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "main", "image": "trainer"}],
            "resourceClaims": [
                {"name": "channel", "resourceClaimTemplateName": f"{domain.name}-channel"}
            ],
        },
    }
    await client.create(PODS, body, namespace=domain.namespace)
    await client.patch(
        PODS,
        pod,
        {"status": {"phase": "Running"}},
        namespace=domain.namespace,
        subresource="status",
    )


async def domain_ready(client: KubeClient, domain: Domain) -> tuple[str, str] | None:
    raw = await client.get(COMPUTE_DOMAINS, domain.name, namespace=domain.namespace)
    condition = msgspec.json.decode(raw, type=ComputeDomain).status.condition("Ready")
    if condition is None or condition.status != "True":
        return None
    return condition.status, str(condition.last_transition_time)


async def prepare(watcher: PluginWatcher, claim: Claim) -> PrepareResult | None:
    try:
        results = await watcher.client(DRIVER_NAME).prepare([claim])
    except KubeletApiError:
        return None  # not (re)registered yet
    return results[claim.uid]


async def test_an_agent_sigkilled_while_a_domain_runs_leaves_imex_and_the_domain_untouched(
    one_node: tuple[ImexCluster, Path],
    emulator: KubeServer,
    service_env: dict[str, str],
    bus_factory: BusFactory,
    tmp_path: Path,
) -> None:
    cluster, topology = one_node
    node = cluster.node_list()[0]
    client = cluster.client
    observed = Observed()
    observer = await bus_factory("observer")
    await observer.subscribe("cdo.v1.domain.>", observed.handle)
    await observer.subscribe(f"cdo.v1.node.{node.name}.imex", observed.handle)

    domain = await create_domain(
        client, namespace="ml", name="train", channel=21, clique=node.topology.clique
    )
    claim = await create_claim(
        client, namespace="ml", name="train-0", domain=domain, node=node.name
    )
    watcher = await cluster.kubelet(node)
    controller = ProgramProcess(
        "services.domain_controller",
        env={
            **service_env,
            **DOMAIN_CONTROLLER_ENV,
            "CDO_HTTP_PORT": str(free_port()),
            "CDO_INSTANCE": "dc-0",
            "CDO_DOMAIN_CONTROLLER_KUBECONFIG": str(emulator.kubeconfig),
        },
        workdir=tmp_path,
        name="domain-controller",
    ).start()
    first = agent_process(node, topology=topology, env=service_env, emulator=emulator, run=1)
    first.start()
    second: ProgramProcess | None = None
    try:
        prepared = await wait_for(
            lambda: prepare(watcher, claim), timeout=30, what="prepare through the plugin"
        )
        assert prepared.ok, prepared.error
        await run_pod(client, domain, pod="train-0-pod", node=node.name)
        ready_before = await wait_for(
            lambda: domain_ready(client, domain), timeout=30, what="the domain Ready"
        )
        spec = node.cdi_root / f"cdo.dev-imex-channel_{claim.uid}.json"
        channel = node.device_root / "channel21"
        files = {path: path.read_bytes() for path in (spec, channel)}
        condition = (await cluster.node_object(node.name)).condition(IMEX_READY_CONDITION)
        assert condition is not None and condition.status == "True"
        record = read_record(node.imex_dir / RECORD)
        assert record is not None and record.process.pid is not None
        daemon = record.process.pid

        first.send(signal.SIGKILL)
        first.wait(10)
        assert _alive(daemon), "the daemon outlives the SIGKILLed agent"

        second = agent_process(node, topology=topology, env=service_env, emulator=emulator, run=2)
        second.start()
        assert (
            await wait_for(
                lambda: prepare(watcher, claim), timeout=30, what="the new agent's plugin"
            )
            == prepared
        ), "a repeated prepare answers from the checkpoint"
        await wait_for(
            lambda: ("agent-2", "READY") in observed.states,
            timeout=30,
            what="the new agent's report of its daemon",
        )

        # The same daemon: same pid and start time, no new start, adopted by the new agent.
        assert _alive(daemon)
        assert read_record(node.imex_dir / RECORD) == record
        log = messages(second)
        assert "adopted the running nvidia-imex" in log
        assert "nvidia-imex started" not in log and "nvidia-imex stopped" not in log
        metrics = http_text(int(service_env["CDO_HTTP_PORT"]), "/metrics")
        assert 'cdo_imex_daemon_adoptions_total{result="adopted"} 1.0' in metrics
        assert "cdo_imex_daemon_starts_total{" not in metrics
        # Its channel device and CDI spec untouched.
        assert {path: path.read_bytes() for path in files} == files
        # The node's IMEX condition and the domain never left Ready.
        after = (await cluster.node_object(node.name)).condition(IMEX_READY_CONDITION)
        assert after is not None and after.status == "True"
        assert after.last_transition_time == condition.last_transition_time
        assert await domain_ready(client, domain) == ready_before
        phases, states = observed.since_ready()
        assert phases and set(phases) == {"Ready"}, observed.phases
        assert states and set(states) == {"READY"}, observed.states

        # A deliberate shutdown (SIGTERM) leaves the daemon running for the next agent too.
        second.send(signal.SIGTERM)
        assert second.wait(20) == 0
        assert _alive(daemon)
        assert "leaving nvidia-imex running for the next agent" in messages(second)
    finally:
        first.stop()
        if second is not None:
            second.stop()
        await asyncio.to_thread(controller.stop)


async def test_an_adopted_daemon_of_another_config_is_restarted_once(
    one_node: tuple[ImexCluster, Path],
) -> None:
    cluster, _ = one_node
    node = cluster.node_list()[0]
    first = await cluster.start(node)
    await wait_for(lambda: first.reporter.ready, timeout=30, what="the first agent's IMEX READY")
    await cluster.stop(node)
    (daemon,) = node.started_pids
    assert _alive(daemon)

    # The next agent renders another config.cfg (a setting changed with the upgrade).
    node.imex_overrides["disconnected_grace_s"] = 30
    second = await cluster.start(node)
    await wait_for(lambda: second.reporter.ready, timeout=30, what="IMEX READY again")
    assert second.controller.adopted
    assert len(node.started_pids) == 2, "restarted once"
    assert not _alive(daemon)
    assert second.controller.pid == node.started_pids[1]
    assert second.controller.restarts == 1
    registry = node.metrics.registry
    assert registry.get_sample_value("cdo_imex_daemon_starts_total", {"reason": "config"}) == 1
    assert registry.get_sample_value("cdo_imex_daemon_adoptions_total", {"result": "adopted"}) == 1
    config = (node.imex_dir / "config.cfg").read_text()
    assert "IMEX_NODE_DISCONNECTED_GRACE_TIME=30" in config
    record = read_record(node.imex_dir / RECORD)
    assert record is not None and record.config_digest == digest(config)
    assert record.process.pid == node.started_pids[1]

    # And the agent after it adopts that one without a restart.
    await cluster.stop(node)
    third = await cluster.start(node)
    await wait_for(lambda: third.reporter.ready, timeout=30, what="IMEX READY, third agent")
    assert third.controller.adopted and third.controller.restarts == 0
    assert len(node.started_pids) == 2


async def test_a_stale_record_naming_another_process_is_not_adopted(
    one_node: tuple[ImexCluster, Path],
) -> None:
    cluster, _ = one_node
    node = cluster.node_list()[0]
    settings = node.settings()
    paths = ImexPaths(directory=node.imex_dir)
    # Another program got the recorded pid (with its true start time: pid reuse at its worst).
    stranger = await asyncio.create_subprocess_exec("sleep", "60")
    try:
        start_time = process_start_time(stranger.pid)
        assert start_time is not None
        nodes_config = render_nodes_config(
            node.topology.clique, slots=settings.imex.max_nodes_per_domain
        )
        config = render_config(settings=settings.imex, address=node.address, paths=paths)
        write_record(
            paths.pid_file,
            DaemonRecord(
                process=ProcessIdentity(pid=stranger.pid, start_time=start_time),
                clique=node.topology.clique,
                slot=node.topology.tray_index,
                config_digest=digest(config),
                map_digest=map_digest(nodes_config),
            ),
        )
        agent = await cluster.start(node)
        await wait_for(lambda: agent.reporter.ready, timeout=30, what="IMEX READY")
        assert not agent.controller.adopted
        (daemon,) = node.started_pids
        assert daemon != stranger.pid and agent.controller.pid == daemon
        assert stranger.returncode is None, "the other process is left alone"
        record = read_record(paths.pid_file)
        assert record is not None and record.process.pid == daemon
        registry = node.metrics.registry
        stale = registry.get_sample_value("cdo_imex_daemon_adoptions_total", {"result": "stale"})
        assert stale == 1
    finally:
        stranger.kill()
        await stranger.wait()


async def launcher_probe(socket: Path) -> tuple[int, str]:
    """The DaemonSet's readiness probe of the imex-daemon container, run as the kubelet runs
    it (tests/integration/deploy/test_probes.py checks the rendered command is this one)."""
    probe = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "services.imex_agent.launchprobe",
        env={**os.environ, SOCKET_VARIABLE: str(socket)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(probe.communicate(), timeout=30)
    assert probe.returncode is not None
    return probe.returncode, out.decode()


async def test_with_the_launcher_the_daemon_outlives_the_agent_and_ends_with_the_pod(
    one_node: tuple[ImexCluster, Path],
    emulator: KubeServer,
    service_env: dict[str, str],
) -> None:
    """The DaemonSet's layout: the launcher (the daemon's container) starts the daemon for the
    agent; the agent's container restarts, the daemon does not; the pod's end stops it."""
    cluster, topology = one_node
    node = cluster.node_list()[0]
    socket = node.imex_dir / "launcher.sock"
    launcher_settings = msgspec.structs.replace(node.settings().imex, launcher_socket=str(socket))
    launcher = ProgramProcess(
        "services.imex_agent.launcher",
        env={**settings_env(launcher_settings, prefix="CDO_IMEX_AGENT_IMEX_")},
        workdir=node.root,
        name="launcher",
    ).start()
    agents: list[ProgramProcess] = []

    def agent(run: int) -> ProgramProcess:
        made = agent_process(
            node,
            topology=topology,
            env=service_env,
            emulator=emulator,
            run=run,
            launcher_socket=str(socket),
        )
        agents.append(made)
        return made.start()

    async def ready_by(run: int) -> bool:
        return any(
            record.get("message") == "IMEX state" and record.get("daemon_state") == "READY"
            for record in agents[run - 1].log_records()
        )

    try:
        # The imex-daemon container's readiness probe: the launcher answers, holding nothing yet.
        await wait_for(lambda: socket.exists(), timeout=30, what="the launcher's socket")
        answered, said = await launcher_probe(socket)
        assert answered == 0 and "holds no daemon" in said, said

        first = agent(1)
        await wait_for(lambda: ready_by(1), timeout=30, what="IMEX READY through the launcher")
        record = read_record(node.imex_dir / RECORD)
        assert record is not None and record.process.pid is not None
        daemon = record.process.pid
        facts = read_process(daemon)
        assert facts is not None
        assert facts.parent == launcher.pid, "the launcher's child, not the agent's"
        answered, said = await launcher_probe(socket)
        assert answered == 0 and f"holds nvidia-imex pid {daemon}" in said, said

        # A launcher that stops answering fails the probe within its timeout; the daemon runs on.
        launcher.send(signal.SIGSTOP)
        try:
            answered, said = await launcher_probe(socket)
        finally:
            launcher.send(signal.SIGCONT)
        assert answered == 1 and "does not answer" in said, said
        assert _alive(daemon)

        first.send(signal.SIGKILL)
        first.wait(10)
        agent(2)
        await wait_for(lambda: ready_by(2), timeout=30, what="IMEX READY, second agent")
        assert "adopted the running nvidia-imex" in messages(agents[1])
        assert read_record(node.imex_dir / RECORD) == record
        assert _alive(daemon)

        # The pod goes (uninstall): the launcher stops the daemon and exits.
        agents[1].send(signal.SIGTERM)
        assert agents[1].wait(20) == 0
        assert _alive(daemon), "the agent's shutdown leaves IMEX running"
        launcher.send(signal.SIGTERM)
        assert launcher.wait(20) == 0
        assert not _alive(daemon)
        answered, said = await launcher_probe(socket)
        assert answered == 1 and "does not answer" in said, said
    finally:
        for made in agents:
            made.stop()
        launcher.stop()
