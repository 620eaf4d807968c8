"""What the engine needs to know about a node, read from the Node object (pure functions).

A node takes part in placement when it carries the clique label ``nvidia.com/gpu.clique`` (the
health monitor removes it on fabric trouble) and has GPUs: allocatable ``nvidia.com/gpu`` (the
device plugin) or devices of NVIDIA's GPU DRA driver (``dragpus.py``). Both describe the same
GPUs where a node runs both, so its size is the larger of the two, and ``gpu_apis`` says which
ways of asking for GPUs the node serves. Of those nodes:

- **healthy**: the kubelet's ``Ready`` is True, no ``cdo.dev/gpu-fault`` taint, no lifecycle
  taint (``node.kubernetes.io/not-ready``, ``unreachable``, pressure ...; NoSchedule or
  NoExecute), and ``cdo.dev/GpuHealthy`` is not False;
- **schedulable**: not cordoned (``spec.unschedulable``, or its
  ``node.kubernetes.io/unschedulable`` taint).

Neither kind of trouble frees what pods already hold there; it only keeps new pods away.

For the pods' own constraints (``eligibility.py``) the facts carry the node's labels, its
allocatable amounts in milli-units, and the taints the health model above leaves to the pods'
tolerations (every NoSchedule/NoExecute taint but cdo's fault taint and the lifecycle ones).

The slot (the node's line in its clique's IMEX node list) is the IMEX agent's
``cdo.dev/imex-slot`` annotation when it was written for the node's current clique; without it,
the node's position among its clique's nodes by name (the tray order of the usual naming).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from services.clique_allocator.dragpus import NodeDraGpus
from services.clique_allocator.placement import Clique
from services.clique_allocator.placement import Node as EngineNode
from shared.crds.names import (
    CLIQUE_LABEL,
    GPU_FAULT_TAINT,
    GPU_HEALTHY_CONDITION,
    GPU_RESOURCE,
    IMEX_CLIQUE_ANNOTATION,
    IMEX_SLOT_ANNOTATION,
    MULTI_NODE_NVLINK_LABEL,
    NVLINK_DOMAIN_LABEL,
)
from shared.kube.models import Node, Taint
from shared.scheduling.requests import allocatable_amounts

LIFECYCLE_TAINT_PREFIX = "node.kubernetes.io/"
CORDON_TAINT = "node.kubernetes.io/unschedulable"
BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
DEVICE_PLUGIN = "device-plugin"
DRA = "dra"


class NodeFacts(msgspec.Struct, frozen=True, kw_only=True):
    """One GPU node as placement sees it."""

    name: str
    clique: str
    cluster_uuid: str = ""
    gpus: int
    slot: int | None = None
    """The IMEX agent's slot, when it published one for this clique."""
    healthy: bool = True
    schedulable: bool = True
    problems: tuple[str, ...] = ()
    """Why the node takes no new pods, for messages (empty when it does)."""
    gpu_apis: frozenset[str] = frozenset({DEVICE_PLUGIN})
    """How pods can ask for the node's GPUs: ``device-plugin``, ``dra``, or both."""
    # What the pods' own constraints are checked against (eligibility.py).
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    allocatable: Mapping[str, int] = msgspec.field(default_factory=dict)
    attachments: int | None = None
    """Channel attachment devices the node's cdo ResourceSlice lists (``attachments.py``);
    None while the allocator has seen no such slice."""

    @property
    def usable(self) -> bool:
        return self.healthy and self.schedulable


def _gpus(node: Node) -> int:
    value = node.status.allocatable.get(GPU_RESOURCE, "")
    try:
        return int(value)
    except ValueError:
        return 0


def _slot(node: Node, clique: str) -> int | None:
    annotations = node.metadata.annotations
    written_for = annotations.get(IMEX_CLIQUE_ANNOTATION)
    if written_for is not None and written_for != clique:
        return None
    try:
        slot = int(annotations.get(IMEX_SLOT_ANNOTATION, ""))
    except ValueError:
        return None
    return slot if slot >= 0 else None


def _troubles(node: Node) -> tuple[list[str], bool]:
    """What keeps the node from new pods (health problems) and whether it is cordoned."""
    problems: list[str] = []
    ready = node.condition("Ready")
    if ready is None or ready.status != "True":
        problems.append("NotReady")
    gpu_health = node.condition(GPU_HEALTHY_CONDITION)
    if gpu_health is not None and gpu_health.status == "False":
        problems.append("GpuUnhealthy")
    cordoned = node.spec.unschedulable
    for taint in node.spec.taints:
        if taint.key == GPU_FAULT_TAINT:
            problems.append(f"{taint.key}={taint.value}" if taint.value else taint.key)
        elif taint.key == CORDON_TAINT:
            cordoned = True
        elif taint.key.startswith(LIFECYCLE_TAINT_PREFIX) and taint.effect in BLOCKING_EFFECTS:
            problems.append(taint.key)
    return problems, cordoned


def node_facts(
    node: Node, dra: NodeDraGpus | None = None, *, attachments: int | None = None
) -> NodeFacts | None:
    """The node's facts, or None when it takes no part in placement (no clique, no GPUs);
    ``dra``: the node's GPUs from NVIDIA's GPU DRA driver, when it publishes any;
    ``attachments``: its channel attachment devices, when its cdo slice is known."""
    clique = node.metadata.labels.get(CLIQUE_LABEL, "")
    plugin_gpus = _gpus(node)
    dra_gpus = dra.published if dra is not None else 0
    gpus = max(plugin_gpus, dra_gpus)
    if not clique or gpus < 1:
        return None
    apis = frozenset(
        api for api, count in ((DEVICE_PLUGIN, plugin_gpus), (DRA, dra_gpus)) if count > 0
    )
    problems, cordoned = _troubles(node)
    healthy = not problems
    others = tuple(
        taint
        for taint in node.spec.taints
        if taint.effect in BLOCKING_EFFECTS
        and taint.key != GPU_FAULT_TAINT
        and not taint.key.startswith(LIFECYCLE_TAINT_PREFIX)
    )
    if cordoned:
        problems.append("Cordoned")
    return NodeFacts(
        name=node.metadata.name,
        clique=clique,
        cluster_uuid=node.metadata.labels.get(NVLINK_DOMAIN_LABEL, ""),
        gpus=gpus,
        slot=_slot(node, clique),
        healthy=healthy,
        schedulable=not cordoned,
        problems=tuple(dict.fromkeys(problems)),
        gpu_apis=apis,
        labels=node.metadata.labels,
        taints=others,
        allocatable=allocatable_amounts(node.status.allocatable or node.status.capacity),
        attachments=attachments,
    )


def without_nvlink(node: Node, dra: NodeDraGpus | None = None) -> bool:
    """A GPU node that the health monitor found on no NVLink fabric
    (``cdo.dev/multi-node-nvlink=false``) and that takes new pods: a node a domain can run on
    without IMEX. A node of a clique that lost its label to a fault, or whose monitor has not
    looked yet, carries no such label."""
    labels = node.metadata.labels
    if labels.get(MULTI_NODE_NVLINK_LABEL) != "false" or labels.get(CLIQUE_LABEL):
        return False
    if max(_gpus(node), dra.published if dra is not None else 0) < 1:
        return False
    problems, cordoned = _troubles(node)
    return not problems and not cordoned


def build_cliques(nodes: Iterable[NodeFacts]) -> tuple[Clique, ...]:
    """The engine's cliques: nodes grouped by the whole clique string, each with its slot."""
    grouped: dict[str, list[NodeFacts]] = {}
    for facts in nodes:
        grouped.setdefault(facts.clique, []).append(facts)
    cliques = []
    for clique_id in sorted(grouped):
        members = sorted(grouped[clique_id], key=lambda facts: facts.name)
        cliques.append(
            Clique(
                id=clique_id,
                nodes=tuple(
                    EngineNode(
                        name=facts.name,
                        slot=facts.slot if facts.slot is not None else position,
                        gpus=facts.gpus,
                        healthy=facts.healthy,
                        schedulable=facts.schedulable,
                    )
                    for position, facts in enumerate(members)
                ),
            )
        )
    return tuple(cliques)
