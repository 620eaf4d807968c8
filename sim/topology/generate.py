"""Topologies of N NVL72 racks, generated instead of written: ``cdo sim up --racks N``.

Each rack is the default one of ``sim/topologies/default.yaml``: 18 trays of 4 GPUs, one
clique, named ``rack-<i>``; nodes ``rack-<i>-tray<tt>`` at ``127.10.<i>.<t+1>`` (the address
rule of :mod:`sim.topology.spec` goes on past 256 racks into the next octet). The result is
written as a topology file, so every process of a simulated system (the cluster, the node
host) reads the same cluster from it, as from a hand-written one.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from sim.topology.spec import RackSpec, TopologySpec

GENERATED_TOPOLOGY_FILE = "topology.yaml"
"""Where ``--racks`` writes the generated topology, in the state directory."""
GENERATED_NAME = "racks"
"""The topology's name, which seeds every derived identifier (UUIDs, serials)."""


def nvl72_racks(racks: int) -> TopologySpec:
    """``racks`` default NVL72 racks (ValueError below one)."""
    if racks < 1:
        raise ValueError(f"a cluster needs at least one rack, not {racks}")
    return TopologySpec(
        name=GENERATED_NAME, racks=tuple(RackSpec(name=f"rack-{i}") for i in range(racks))
    )


def write_topology(spec: TopologySpec, path: Path) -> Path:
    """``spec`` as a topology file at ``path`` (load_topology reads it back unchanged)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    header = f"# Generated: {len(spec.racks)} NVL72 racks (sim/topology/generate.py).\n"
    path.write_bytes(header.encode() + msgspec.yaml.encode(spec))
    return path
