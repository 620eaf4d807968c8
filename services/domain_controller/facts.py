"""What the status computation looks at, distilled from API objects (pure functions).

How per-node state reaches the domain controller
-------------------------------------------------
Each node's IMEX agent owns one condition in its Node's status, written with a strategic merge
patch of ``nodes/<name>/status`` (merge key ``type``, so other writers' conditions stay)::

    {"status": {"conditions": [{
        "type": "cdo.dev/ImexReady",
        "status": "True",                 # "False" while not READY; "Unknown" if it cannot tell
        "reason": "ImexReady",            # or the daemon state: "WaitingForPeers", "NotRunning" ...
        "message": "nvidia-imex-ctl -q: READY; 18/18 peers connected",
        "lastHeartbeatTime": "...", "lastTransitionTime": "..."}]}}

``True`` means the node's ``nvidia-imex`` answers READY with the clique's node list; anything
else, or no condition at all (no agent has reported yet), counts as not ready. The health
monitor's ``cdo.dev/gpu-fault`` taint marks a GPU or fabric fault, and the kubelet's own
``Ready`` condition, when present and not True, marks a node that cannot be trusted to report.

The channel itself needs no report of its own: a pod reaches phase Running only after the
kubelet's NodePrepareResources call succeeded, and that is where the agent creates the domain's
channel device and injects it through CDI. A member pod that runs therefore has its channel.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from services.domain_controller.objects import DomainNode, DomainPod
from shared.crds.computedomain import ComputeDomain
from shared.crds.names import CLIQUE_LABEL, GPU_FAULT_TAINT, IMEX_READY_CONDITION
from shared.crds.placement import PlacementSpec


class NodeFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What matters about one member node."""

    name: str
    address: str = ""
    imex: str = ""
    """Status of ``cdo.dev/ImexReady``: "True", "False", "Unknown", or "" when absent."""
    imex_reason: str = ""
    kubelet_ready: str = ""
    """Status of the node's ``Ready`` condition, or "" when absent."""
    faults: tuple[str, ...] = ()
    """The node's ``cdo.dev/gpu-fault`` taints, as ``key=value:effect``."""
    clique: str | None = None
    """The node's ``nvidia.com/gpu.clique`` label (None: no label, e.g. its fabric was lost;
    facts built without labels leave it None and it is not checked)."""


class PodFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What matters about one pod that uses the domain's claims."""

    name: str
    node: str = ""
    phase: str = ""

    @property
    def running(self) -> bool:
        return self.phase == "Running"

    @property
    def finished(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


class DomainFacts(msgspec.Struct, frozen=True, kw_only=True):
    """Everything the status of one domain depends on."""

    generation: int = 0
    deleting: bool = False
    template_conflict: str = ""
    """Why the template name cannot be the domain's ("" when it is, or will be)."""
    placement: PlacementSpec | None = None
    pods: tuple[PodFacts, ...] = ()
    """Pods that use the domain's claims (reference its template), in name order."""
    nodes: Mapping[str, NodeFacts] = msgspec.field(default_factory=dict)
    """Member nodes that exist, by name; a member missing here has left the cluster."""
    gang_size: int = 0
    """``spec.gang.size``, or 0 when the domain does not set it."""
    per_gpu_faults: bool | None = None
    """Whether a fault of one of the DRA GPUs the domain's pods use stays on that GPU (the
    server serves DeviceTaintRule); None when the pods use no DRA GPU."""


def gang_size(domain: ComputeDomain) -> int:
    """``spec.gang.size``, or 0 without a gang or a size (the workload's count then)."""
    gang = domain.spec.gang
    return gang.size if gang is not None and gang.size is not None else 0


def node_facts(node: DomainNode) -> NodeFacts:
    imex = node.condition(IMEX_READY_CONDITION)
    ready = node.condition("Ready")
    return NodeFacts(
        name=node.metadata.name,
        address=node.internal_ip,
        imex=imex.status if imex else "",
        imex_reason=imex.reason if imex else "",
        kubelet_ready=ready.status if ready else "",
        faults=tuple(
            f"{taint.key}={taint.value}:{taint.effect}"
            for taint in node.spec.taints
            if taint.key == GPU_FAULT_TAINT
        ),
        clique=node.metadata.labels.get(CLIQUE_LABEL, ""),
    )


def pod_facts(pod: DomainPod) -> PodFacts:
    return PodFacts(name=pod.metadata.name, node=pod.spec.node_name, phase=pod.status.phase)


def gather(
    *,
    generation: int,
    deleting: bool,
    template_conflict: str,
    placement: PlacementSpec | None,
    pods: Iterable[DomainPod],
    nodes: Mapping[str, DomainNode | None],
    gang_size: int,
    per_gpu_faults: bool | None = None,
) -> DomainFacts:
    """Facts from the objects the reconciler found in its caches."""
    return DomainFacts(
        generation=generation,
        deleting=deleting,
        template_conflict=template_conflict,
        placement=placement,
        pods=tuple(sorted((pod_facts(pod) for pod in pods), key=lambda p: p.name)),
        nodes={name: node_facts(node) for name, node in nodes.items() if node is not None},
        gang_size=gang_size,
        per_gpu_faults=per_gpu_faults,
    )


def member_nodes(placement: PlacementSpec | None, pods: Iterable[DomainPod]) -> tuple[str, ...]:
    """The nodes the status reads: the Placement's, or for a domain that runs without IMEX the
    nodes its pods are bound to."""
    if placement is None:
        return ()
    if placement.multi_node_nvlink:
        return placement.nodes
    return tuple(sorted({pod.spec.node_name for pod in pods if pod.spec.node_name}))
