"""A small simulated cluster in this process with a node host serving all of its nodes.

Two racks of two nodes each (two cliques) on a random 127.x block with free IMEX ports, the
cluster's kubelets, scheduler and controllers in this event loop, a real nats-server, and a
:class:`sim.nodehost.NodeHost` following the cluster's power switches, with its control API on
a free port, and the circuit breaker's arbiter (tests/support/arbiter.py). Services run with
short hold-downs and latches, so a fault clears within a test.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import shutil
import tempfile
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import msgspec
import pytest
from opentelemetry.sdk.trace import TracerProvider

from services.health_monitor.settings import MonitorSettings
from shared.bus import NatsSettings
from shared.crds.names import CLIQUE_LABEL, IMEX_READY_CONDITION
from shared.kube.informer import InformerSettings
from shared.kube.models import Node
from shared.kube.resources import NODES
from sim.cluster import ClusterOptions, SimulatedCluster
from sim.kubelet import KubeletSettings, LifecycleSettings
from sim.natsserver import NatsServer, free_port
from sim.nodehost import (
    ControlServer,
    FleetPower,
    HostSettings,
    NodeHost,
    NodeLayout,
    ServiceSettings,
    Tracers,
)
from sim.nodehost.settings import load_service_settings
from sim.topology import Node as TopologyNode
from tests.support.arbiter import Arbiter
from tests.support.wait import wait_for

FAST_INFORMERS = InformerSettings(backoff_initial_s=0.05, backoff_max_s=0.5)
FAST_MONITOR = MonitorSettings(
    read_interval_s=0.1,
    event_wait_s=0.05,
    hold_down_s=0.6,
    xid_latch_s=0.3,
    nvml_retry_s=0.05,
    nvml_retry_max_s=0.2,
    write_retry_s=0.05,
    write_retry_max_s=0.5,
    kube_events=False,
    informer=FAST_INFORMERS,
)

_NODE = msgspec.json.Decoder(Node)


def topology_text() -> str:
    """Two racks of two trays on a random 127.x block, so parallel runs never share addresses."""
    base = f"127.{random.randint(64, 250)}.{random.randrange(0, 200, 8)}.0"
    return (
        f"name: nodehost-test\nnodes_per_rack: 2\naddress_base: {base}\n"
        "racks:\n  - name: rack-0\n  - name: rack-1\n"
    )


def fast_services() -> ServiceSettings:
    services = load_service_settings({})
    return ServiceSettings(
        imex=services.with_imex(
            server_port=free_port(),
            cmd_port=free_port(),
            reload_min_interval_s=0.5,
            poll_interval_s=1.0,
            fast_poll_interval_s=0.2,
            fast_poll_window_s=2.0,
            clique_refresh_s=1.0,
            restart_backoff_initial_s=0.2,
        ).imex,
        agent_informer=FAST_INFORMERS,
        attachments=4,
        monitor=FAST_MONITOR,
    )


def fast_host(
    cluster: SimulatedCluster, nodes: Sequence[TopologyNode], *, nats_url: str, state: Path
) -> NodeHost:
    """A node host of ``nodes`` of ``cluster`` with the fast services, its files below ``state``."""
    tracer = TracerProvider().get_tracer("test")
    return NodeHost(
        nodes=nodes,
        client=cluster.client,
        nats=NatsSettings(url=nats_url, reconnect_wait_s=0.1),
        power=FleetPower(cluster.fleet),
        layout=NodeLayout(root=state / "nodehost", kubelet_root=cluster.fleet.kubelet_root),
        tracers=Tracers(agent=tracer, monitor=tracer),
        services=fast_services(),
        settings=HostSettings(power_poll_s=0.05, restart_backoff_s=0.1),
    )


@dataclass
class Hosted:
    """The running cluster, the node host and how to reach its control API."""

    cluster: SimulatedCluster
    host: NodeHost
    control_url: str
    nats_url: str
    http: aiohttp.ClientSession

    @property
    def names(self) -> list[str]:
        return [node.name for node in self.cluster.topology.nodes]

    async def node(self, name: str) -> Node:
        return _NODE.decode(await self.cluster.client.get(NODES, name))

    async def control(self, method: str, path: str, body: object = None) -> tuple[int, object]:
        async with self.http.request(method, self.control_url + path, json=body) as response:
            return response.status, await response.json()

    async def settled(self) -> None:
        """Every node labelled with its clique by its monitor and ImexReady=True by its agent."""

        async def probe() -> bool:
            for topology in self.cluster.topology.nodes:
                node = await self.node(topology.name)
                ready = node.condition(IMEX_READY_CONDITION)
                if node.metadata.labels.get(CLIQUE_LABEL) != topology.clique:
                    return False
                if ready is None or ready.status != "True":
                    return False
            return True

        await wait_for(probe, timeout=60, interval=0.1, what="labelled, IMEX-ready nodes")


@pytest.fixture
async def hosted(nats_server: NatsServer) -> AsyncIterator[Hosted]:
    # Short: the DRA plugin's unix socket lives below it (107 bytes at most).
    state = Path(tempfile.mkdtemp(prefix="nh-", dir="/tmp"))
    topology = state / "topology.yaml"
    topology.write_text(topology_text())
    options = ClusterOptions(
        state_dir=state,
        topology=topology,
        kubelet=KubeletSettings(lease_duration_s=4, heartbeat_interval_s=0.5),
        lifecycle=LifecycleSettings(node_monitor_grace_s=2, default_toleration_s=1),
    )
    try:
        async with (
            SimulatedCluster.running(options) as cluster,
            aiohttp.ClientSession() as http,
        ):
            host = fast_host(cluster, cluster.topology.nodes, nats_url=nats_server.url, state=state)
            server = ControlServer(host)
            url = await server.start()
            task = asyncio.create_task(host.run(), name="node host")
            # The circuit breaker's arbiter answers the monitors' claims for NoExecute, as the
            # clique allocator's leader does in the whole system.
            arbiter = Arbiter(cluster.client)
            await arbiter.start()
            try:
                yield Hosted(
                    cluster=cluster, host=host, control_url=url, nats_url=nats_server.url, http=http
                )
                assert not task.done(), task.exception()
            finally:
                await arbiter.stop()
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                await server.stop()
    finally:
        shutil.rmtree(state, ignore_errors=True)
