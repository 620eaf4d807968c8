"""Simulated cluster topology: racks of GB200 trays, their cliques, addresses and GPUs.

A topology is written in YAML (see ``sim/topologies/default.yaml``), decoded into a
:class:`TopologySpec` and expanded by :func:`expand` into a :class:`Cluster` of concrete
:class:`Node` values. Everything derived (cluster UUIDs, GPU UUIDs, serials, addresses) is a
pure function of the names in the file, so a file always yields the same cluster.

    cluster = load_topology()                      # sim/topologies/default.yaml
    cluster = load_topology("sim/topologies/eight-racks.yaml")
    node = cluster.node("rack-0-tray00")
    node.address, node.clique, [gpu.uuid for gpu in node.gpus]

A file that cannot be used raises :class:`TopologyError` (a ``shared.errors.ConfigError``)
whose message names the field, e.g. ``racks[1].cliques[0].trays: tray 18 is outside ...``.
"""

from sim.topology.errors import TopologyError
from sim.topology.expand import DEFAULT_CLIQUE_ID, expand
from sim.topology.load import (
    DEFAULT_TOPOLOGY,
    TOPOLOGIES_DIR,
    load_topology,
    parse_spec,
    parse_topology,
)
from sim.topology.model import Cluster, Gpu, Node
from sim.topology.spec import CliqueSpec, DriverSpec, RackSpec, TopologySpec

__all__ = [
    "DEFAULT_CLIQUE_ID",
    "DEFAULT_TOPOLOGY",
    "TOPOLOGIES_DIR",
    "CliqueSpec",
    "Cluster",
    "DriverSpec",
    "Gpu",
    "Node",
    "RackSpec",
    "TopologyError",
    "TopologySpec",
    "expand",
    "load_topology",
    "parse_spec",
    "parse_topology",
]
