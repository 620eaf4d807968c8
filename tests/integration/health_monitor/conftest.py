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


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    return load_topology()


@pytest.fixture
async def start_monitor(
    cluster: Cluster, kube_client: KubeClient, bus_factory: BusFactory
) -> MonitorFactory:
    """Start a monitor on a node of the default topology (its Node created first)."""
    publisher = await bus_factory("health-monitor")
    subscriber = await bus_factory("observer")

    @contextlib.asynccontextmanager
    async def start(
        index: int = 0, *, register: bool = True, **options: Any
    ) -> AsyncIterator[Harness]:
        topology = cluster.nodes[index]
        if register:
            await create_node(kube_client, topology.name)
        async with running_monitor(
            topology=topology,
            client=kube_client,
            publisher=publisher,
            subscriber=subscriber,
            **options,
        ) as harness:
            yield harness

    return start
