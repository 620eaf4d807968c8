"""What a hollow node's IMEX agent and health monitor would write on its Node: pure functions.

A node of a full rack runs the real services (:mod:`sim.nodehost`), which read NVML and IMEX
and write what they find. A hollow node has neither; it shows what the real services write on
a healthy node whose GPUs finished fabric registration in the topology's clique and whose IMEX
daemon is READY, so the control plane (domain controller, clique allocator, scheduler) sees
the node as it would see a full one:

- the health monitor's clique labels (``nvidia.com/gpu.clique``, ``cdo.dev/nvlink-domain``;
  ``cdo.dev/multi-node-nvlink=false`` on a node without NVLink) and ``cdo.dev/GpuHealthy``;
- the IMEX agent's ``cdo.dev/imex-*`` annotations (address, slot = the tray's platform index,
  as the agent reads it from NVML), ``cdo.dev/ImexReady`` and ``cdo.dev/CdiEnabled``, and its
  ResourceSlice of channel attachments, built by the agent's own manifest function.

The condition messages say the node is hollow, so ``kubectl describe node`` tells them apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from services.imex_agent.names import SLOT_SOURCE_PLATFORM
from services.imex_agent.resourceslice import desired_slice
from services.imex_agent.roster import annotations_for
from shared.crds.names import (
    CDI_ENABLED,
    CDI_ENABLED_CONDITION,
    CLIQUE_LABEL,
    GPU_HEALTHY_CONDITION,
    IMEX_READY_CONDITION,
    NVLINK_DOMAIN_LABEL,
)
from sim.kubelet.models import Node
from sim.kubelet.timefmt import rfc3339
from sim.topology import Node as TopologyNode

MULTI_NODE_NVLINK_LABEL = "cdo.dev/multi-node-nvlink"

HOLLOW_MESSAGE = "hollow node (docs/simulator.md#hollow-racks)"

# (type, reason, message) of each condition the node's services report on a healthy node.
_CONDITIONS: tuple[tuple[str, str, str], ...] = (
    (GPU_HEALTHY_CONDITION, "GpuHealthy", f"{HOLLOW_MESSAGE}: no GPU is read"),
    (IMEX_READY_CONDITION, "ImexReady", f"{HOLLOW_MESSAGE}: no IMEX daemon runs"),
    (CDI_ENABLED_CONDITION, CDI_ENABLED, f"{HOLLOW_MESSAGE}: no runtime configuration is read"),
)


def clique_labels(node: TopologyNode) -> dict[str, str]:
    """The labels the health monitor sets once every GPU registered with the fabric."""
    if not node.nvlink:
        return {MULTI_NODE_NVLINK_LABEL: "false"}
    return {CLIQUE_LABEL: node.clique, NVLINK_DOMAIN_LABEL: node.cluster_uuid}


def imex_annotations(node: TopologyNode) -> dict[str, str]:
    """The IMEX agent's address and slot (none on a node without NVLink: it runs no daemon)."""
    if not node.nvlink:
        return {}
    return annotations_for(
        clique=node.clique, address=node.address, slot=node.tray_index, source=SLOT_SOURCE_PLATFORM
    )


def metadata_patch(node: TopologyNode) -> dict[str, Any]:
    """A JSON merge patch of the labels and annotations."""
    return {"metadata": {"labels": clique_labels(node), "annotations": imex_annotations(node)}}


def conditions_body(now: datetime) -> list[dict[str, str]]:
    """The services' three conditions, True, as a strategic merge patch of the status lists them."""
    stamp = rfc3339(now)
    return [
        {
            "type": kind,
            "status": "True",
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
        }
        for kind, reason, message in _CONDITIONS
    ]


def channel_slice(node: TopologyNode, *, node_uid: str, attachments: int = 0) -> dict[str, Any]:
    """The agent's ResourceSlice; ``attachments`` 0: two per GPU, the agent's default."""
    return desired_slice(
        node=node.name,
        node_uid=node_uid,
        clique=node.clique,
        attachments=attachments or max(1, 2 * len(node.gpus)),
        generation=1,
    )


def _subset(have: Mapping[str, str], wanted: Mapping[str, str]) -> bool:
    return all(have.get(key) == value for key, value in wanted.items())


def published(current: Node, node: TopologyNode) -> bool:
    """Whether the Node shows the labels, annotations and conditions (all True)."""
    meta = current.metadata
    if not _subset(meta.labels, clique_labels(node)):
        return False
    if not _subset(meta.annotations, imex_annotations(node)):
        return False
    statuses = {c.type: c.status for c in current.status.conditions}
    return all(statuses.get(kind) == "True" for kind, _reason, _message in _CONDITIONS)
