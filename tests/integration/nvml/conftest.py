"""The NVML interface of shared.nvml driven against the simulated NVML of sim.nvml."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack

import pytest

from shared.nvml import PynvmlNvml
from sim.nvml import SimulatedNvml, bind
from sim.topology import Cluster, Node, load_topology

NvmlFactory = Callable[[Node], tuple[SimulatedNvml, PynvmlNvml]]


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    return load_topology()


@pytest.fixture(scope="session")
def partitioned() -> Cluster:
    """Rack 0 split into cliques 1 (trays 0-8) and 2; rack 1's driver lacks fabric info v3."""
    return load_topology("sim/topologies/partitioned.yaml")


@pytest.fixture
def sim(cluster: Cluster) -> SimulatedNvml:
    """The simulated NVML of the default topology's first node."""
    return SimulatedNvml(cluster.nodes[0])


@pytest.fixture
def nvml(sim: SimulatedNvml) -> Iterator[PynvmlNvml]:
    """The interface under test, initialised, with ``sim`` selected for the test's context."""
    with bind(sim):
        interface = PynvmlNvml()
        interface.init()
        yield interface
        interface.shutdown()


@pytest.fixture
def open_node() -> Iterator[NvmlFactory]:
    """Open the interface on a given node: (its simulated NVML, the initialised interface).

    The node stays selected for the rest of the test, so one node per test.
    """
    with ExitStack() as stack:

        def make(node: Node) -> tuple[SimulatedNvml, PynvmlNvml]:
            simulated = SimulatedNvml(node)
            stack.enter_context(bind(simulated))
            interface = PynvmlNvml()
            interface.init()
            stack.callback(interface.shutdown)
            return simulated, interface

        yield make
