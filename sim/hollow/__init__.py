"""Hollow nodes: nodes of a simulated cluster that the control plane sees whole, at a fraction
of a full node's cost (:mod:`sim.hollow.fleet`; docs/simulator.md#hollow-racks).

``cdo sim up --racks N --full-racks M`` runs the first M racks full (a simulated kubelet each,
the IMEX agent and health monitor in the node host) and the rest hollow.
"""

from sim.hollow.fleet import HollowNode, HollowNodes
from sim.hollow.nodeservices import clique_labels

__all__ = ["HollowNode", "HollowNodes", "clique_labels"]
