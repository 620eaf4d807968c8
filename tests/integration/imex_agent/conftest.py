"""Fixtures for the IMEX agent's integration tests."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from shared.kube.client import KubeClient
from tests.conftest import BusFactory
from tests.integration.imex_agent.harness import (
    ImexCluster,
    imex_cluster,
    install,
    random_topology,
)


@pytest.fixture
def short_root(tmp_path_factory: pytest.TempPathFactory) -> Callable[[], Path]:
    """Short per-node directories: unix socket paths are limited to 107 bytes."""
    return lambda: tmp_path_factory.mktemp("n")


@pytest.fixture
async def cluster(
    kube_client: KubeClient,
    bus_factory: BusFactory,
    short_root: Callable[[], Path],
    tmp_path: Path,
) -> AsyncIterator[ImexCluster]:
    """Three nodes of one clique (one rack), registered and labelled; no agent started."""
    await install(kube_client)
    async with imex_cluster(
        client=kube_client,
        bus_factory=bus_factory,
        topology=random_topology(racks=2, nodes=3),
        root_factory=short_root,
        work=tmp_path,
    ) as made:
        yield made


@pytest.fixture(autouse=True)
def agent_logs(caplog: pytest.LogCaptureFixture) -> None:
    """Build every record the agent logs at info level (a bad ``extra`` fails the test)."""
    caplog.set_level(logging.INFO, logger="cdo.imex_agent")
