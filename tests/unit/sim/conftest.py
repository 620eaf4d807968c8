"""Fixtures for the simulated topology and NVML."""

from __future__ import annotations

from collections.abc import Iterator

import pynvml
import pytest

from sim.nvml import SimulatedNvml, bind
from sim.topology import Cluster, load_topology


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    return load_topology()


@pytest.fixture
def node_nvml(cluster: Cluster) -> SimulatedNvml:
    """A fresh simulated NVML for the first node of the default topology."""
    return SimulatedNvml(cluster.nodes[0])


@pytest.fixture
def nvml(node_nvml: SimulatedNvml) -> Iterator[SimulatedNvml]:
    """``node_nvml`` selected for the test's context, with pynvml initialised."""
    with bind(node_nvml):
        pynvml.nvmlInit()
        yield node_nvml
        if node_nvml.initialized:
            pynvml.nvmlShutdown()
