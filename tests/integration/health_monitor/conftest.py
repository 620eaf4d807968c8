"""Fixtures: the emulator, a real nats-server and a monitor on a simulated node."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from shared.kube.client import KubeClient
from sim.topology import Cluster, load_topology
from tests.conftest import BusFactory
from tests.integration.health_monitor.harness import (
    Harness,
    MonitorFactory,
    create_node,
    running_monitor,
)
from tests.support.arbiter import Arbiter


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    return load_topology()


@pytest.fixture
async def arbiter(kube_client: KubeClient) -> AsyncIterator[Arbiter]:
    """The circuit breaker's arbiter (the clique allocator's leader runs it in a cluster)."""
    running = Arbiter(kube_client)
    yield running
    await running.stop()


@pytest.fixture
async def start_monitor(
    cluster: Cluster, kube_client: KubeClient, bus_factory: BusFactory, arbiter: Arbiter
) -> MonitorFactory:
    """Start a monitor on a node of the default topology (its Node created first), and the
    breaker's arbiter with the default caps unless the test started one."""
    publisher = await bus_factory("health-monitor")
    subscriber = await bus_factory("observer")

    @contextlib.asynccontextmanager
    async def start(
        index: int = 0,
        *,
        register: bool = True,
        client: KubeClient | None = None,
        **options: Any,
    ) -> AsyncIterator[Harness]:
        await arbiter.ensure()
        topology = cluster.nodes[index]
        if register:
            await create_node(kube_client, topology.name)
        async with running_monitor(
            topology=topology,
            client=client or kube_client,
            publisher=publisher,
            subscriber=subscriber,
            **options,
        ) as harness:
            yield harness

    return start
