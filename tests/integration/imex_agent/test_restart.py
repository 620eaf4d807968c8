"""The agent as a real process: SIGKILLed after prepare and restarted, it still cleans up.

The process is the service's own composition root (``python -m services.imex_agent`` through a
launcher that binds the node's simulated NVML), configured by CDO_* variables, talking to the
API emulator and a real nats-server, with its simulated IMEX daemon as its child process. The
restarted agent adopts the daemon the killed one left (test_adopt.py checks that in depth);
this agent is set to stop its daemon on SIGTERM (``stop_on_exit``).
"""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import msgspec
import pytest

from services.imex_agent.checkpoint import CheckpointData
from services.imex_agent.preflight import is_running, read_record
from shared.crds.names import DRIVER_NAME
from shared.kube.client import KubeClient
from shared.kubeletapi import KubeletApiError, PrepareResult
from sim.kubeapi import KubeServer
from tests.conftest import BusFactory
from tests.integration.imex_agent.harness import (
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


@pytest.fixture
async def one_node(
    kube_client: KubeClient,
    bus_factory: BusFactory,
    short_root: Callable[[], Path],
    tmp_path: Path,
) -> AsyncIterator[tuple[ImexCluster, Path]]:
    async with one_node_cluster(
        client=kube_client, bus_factory=bus_factory, root_factory=short_root, work=tmp_path
    ) as (cluster, topology_file):
        yield cluster, topology_file


def agent_process(
    node: SimNode, *, topology: Path, env: dict[str, str], emulator: KubeServer, run: int
) -> ProgramProcess:
    settings = node.settings()
    settings = msgspec.structs.replace(
        settings, api=msgspec.structs.replace(settings.api, kubeconfig=str(emulator.kubeconfig))
    )
    return ProgramProcess(
        "tests.integration.imex_agent.launch",
        str(topology),
        node.name,
        env={**env, **settings_env(settings), "CDO_INSTANCE": f"agent-{run}"},
        workdir=node.root,
        name=f"agent-{run}",
    )


async def test_agent_killed_after_prepare_and_restarted_still_cleans_up(
    one_node: tuple[ImexCluster, Path],
    emulator: KubeServer,
    service_env: dict[str, str],
) -> None:
    cluster, topology = one_node
    node = cluster.node_list()[0]
    client = cluster.client
    await cluster.register(node)
    domain = await create_domain(
        client, namespace="ml", name="train", channel=21, clique=node.topology.clique
    )
    claim = await create_claim(
        client, namespace="ml", name="train-0", domain=domain, node=node.name
    )
    watcher = await cluster.kubelet(node)

    async def call_prepare() -> PrepareResult | None:
        try:
            results = await watcher.client(DRIVER_NAME).prepare([claim])
        except KubeletApiError:
            return None  # not (re)registered yet
        return results[claim.uid]

    first = agent_process(node, topology=topology, env=service_env, emulator=emulator, run=1)
    first.start()
    try:
        prepared = await wait_for(call_prepare, timeout=30, what="prepare through the plugin")
        assert prepared.ok, prepared.error
        spec = node.cdi_root / f"cdo.dev-imex-channel_{claim.uid}.json"
        channel = node.device_root / "channel21"
        assert spec.exists() and channel.exists()
        written = spec.read_bytes()
        assert b"CDO_SLICE_RANK=0" in written

        async def imex_ready() -> bool:
            return await cluster.condition(node.name) == ("True", "ImexReady")

        await wait_for(imex_ready, timeout=30, what="the first agent's IMEX READY")
        old_record = read_record(node.imex_dir / "nvidia-imex.pid")
        assert old_record is not None
        old_daemon = old_record.process
        assert old_daemon.pid is not None

        first.send(signal.SIGKILL)
        first.wait(10)
        # The daemon outlives the killed agent; the next agent adopts it.
        assert is_running(old_daemon.pid)
    finally:
        first.stop()

    second = agent_process(node, topology=topology, env=service_env, emulator=emulator, run=2)
    second.start()
    try:
        again = await wait_for(call_prepare, timeout=30, what="the restarted agent's plugin")
        assert again == prepared, "the checkpoint answers a repeated prepare the same way"
        assert spec.read_bytes() == written, "the checkpoint keeps the pod's slice seat"

        async def call_unprepare() -> bool:
            try:
                results = await watcher.client(DRIVER_NAME).unprepare([claim])
            except KubeletApiError:
                return False
            return results[claim.uid].ok

        await wait_for(call_unprepare, timeout=15, what="unprepare after the restart")
        assert not spec.exists()
        assert not channel.exists()
        checkpoint = msgspec.json.decode(
            (node.kubelet_root / "plugins" / DRIVER_NAME / "checkpoint.json").read_bytes(),
            type=CheckpointData,
        )
        assert checkpoint.claims == {}
        assert checkpoint.channels == []

        await wait_for(imex_ready, timeout=30, what="the restarted agent's IMEX READY")
        assert _alive(old_daemon.pid), "adopted, not replaced"
        record = read_record(node.imex_dir / "nvidia-imex.pid")
        assert record is not None and record.process == old_daemon

        second.send(signal.SIGTERM)
        assert second.wait(20) == 0
        pid = old_daemon.pid
        await wait_for(lambda: not _alive(pid), timeout=10, what="daemon stopped with its agent")
        records = second.log_records()
        assert records[-1]["message"] == "shutdown complete"
        assert records[-1]["leftover_tasks"] == 0
    finally:
        second.stop()


def _alive(pid: int) -> bool:
    """Running and not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z" and is_running(pid)
