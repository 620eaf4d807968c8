"""cdo's per-node services (IMEX agent, health monitor) for many simulated nodes in one process.

- ``host``: :class:`NodeHost` and :class:`HostedNode`: each node's NVML, IMEX daemon and
  services, following the node's power;
- ``imex``: the node's simulated IMEX daemon behind the agent's ``Imex`` handle;
- ``power``: where the power state of the nodes comes from (the cluster's control API, or an
  in-process kubelet fleet);
- ``faults``: the NVML faults the control API injects; ``control``: the control API;
- ``settings``: CDO_NODEHOST_* and the hosted services' settings, the per-node file layout;
- ``__main__``: ``python -m sim.nodehost``.

docs/nodehost.md describes how it runs and what it decides.
"""

from sim.nodehost.control import STATE_FILE, ControlServer, NodeHostInfo, control_app
from sim.nodehost.faults import (
    ClearFaults,
    FabricFault,
    Fault,
    GpuLostFault,
    NvlinkFault,
    XidFault,
    inject,
)
from sim.nodehost.host import AGENT, MONITOR, HostedNode, NodeHost, NodeStatus, Tracers
from sim.nodehost.power import ClusterPower, FleetPower, PowerSource, PowerUnavailableError
from sim.nodehost.settings import HostSettings, NodeLayout, ServiceSettings

__all__ = [
    "AGENT",
    "MONITOR",
    "STATE_FILE",
    "ClearFaults",
    "ClusterPower",
    "ControlServer",
    "FabricFault",
    "Fault",
    "FleetPower",
    "GpuLostFault",
    "HostSettings",
    "HostedNode",
    "NodeHost",
    "NodeHostInfo",
    "NodeLayout",
    "NodeStatus",
    "NvlinkFault",
    "PowerSource",
    "PowerUnavailableError",
    "ServiceSettings",
    "Tracers",
    "XidFault",
    "control_app",
    "inject",
]
