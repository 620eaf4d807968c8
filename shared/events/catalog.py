"""The events cdo publishes. This module is the contract; proto/ is generated from it.

Schemas evolve additively: a new field always has a default, and decoders ignore fields they do
not know, so old consumers keep working. Enumerations are plain strings with their known values
documented, for the same reason: a new value must not make an old decoder reject a message.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

import msgspec
from msgspec import Meta

from shared.events import subjects
from shared.events.base import Event
from shared.events.subjects import SubjectTemplate
from shared.events.vocabulary import (
    FAULT_SEVERITIES,
    Action,
    DomainPhase,
    FaultScope,
    FaultSignal,
    ImexDaemonState,
    ImexDomainState,
    MemberStatus,
    one_of,
)

NodeName = Annotated[str, Meta(description="Kubernetes node name.", min_length=1)]
CliqueId = Annotated[
    str,
    Meta(
        description='NVLink clique: "<cluster UUID>.<clique id>" as in label nvidia.com/gpu.clique.'
    ),
]
GpuUuids = Annotated[tuple[str, ...], Meta(description="UUIDs of the GPUs concerned.")]


class DomainMember(msgspec.Struct, frozen=True, kw_only=True):
    """One node of a ComputeDomain."""

    node: NodeName
    index: Annotated[
        int,
        Meta(
            description="The node's IMEX slot in its clique; -1 on a node without multi-node "
            "NVLink (as NVIDIA's status.nodes[].index).",
            ge=-1,
        ),
    ]
    address: Annotated[str, Meta(description="The node's IMEX address.")] = ""
    pods: Annotated[int, Meta(description="Pods of the domain on this node.", ge=0)] = 0
    gpus: Annotated[int, Meta(description="GPUs the domain uses on this node.", ge=0)] = 0
    status: Annotated[
        str,
        Meta(description="Whether the member is ready.", extra_json_schema=one_of(MemberStatus)),
    ] = MemberStatus.NOT_READY.value
    clique: CliqueId = ""


class DomainSlice(msgspec.Struct, frozen=True, kw_only=True):
    """One slice of a ComputeDomain: consecutive ranks inside one clique."""

    index: Annotated[int, Meta(description="Slice number, from 0.", ge=0)]
    clique: CliqueId
    channel: Annotated[int, Meta(description="The domain's IMEX channel in the clique.", ge=0)]
    unit: Annotated[
        str,
        Meta(
            description="The gang unit of the slice (a LeaderWorkerSet group, named by its "
            "leader pod, or a value of spec.gang.unitLabel); empty when the domain is one gang. "
            "Ranks count within the unit; each unit has its own channel in a clique."
        ),
    ] = ""
    first_rank: Annotated[int, Meta(description="The slice's lowest rank in the gang.", ge=0)] = 0
    size: Annotated[int, Meta(description="Ranks the slice covers.", ge=0)] = 0
    pods: Annotated[int, Meta(description="Pods placed in the slice.", ge=0)] = 0
    running: Annotated[int, Meta(description="Of those, pods running.", ge=0)] = 0
    nodes: Annotated[tuple[str, ...], Meta(description="Member nodes of the slice.")] = ()


class DomainMembershipChanged(Event, frozen=True, kw_only=True, tag="dev.cdo.v1.domain.membership"):
    """A ComputeDomain's placement, members or phase changed."""

    subject_template: ClassVar[SubjectTemplate] = subjects.DOMAIN_MEMBERSHIP
    snapshot_template: ClassVar[SubjectTemplate | None] = subjects.DOMAIN_SNAPSHOT

    namespace: Annotated[str, Meta(description="Namespace of the ComputeDomain.", min_length=1)]
    name: Annotated[str, Meta(description="Name of the ComputeDomain.", min_length=1)]
    uid: Annotated[str, Meta(description="metadata.uid of the ComputeDomain.")] = ""
    generation: Annotated[int, Meta(description="metadata.generation observed.", ge=0)] = 0
    phase: Annotated[
        str,
        Meta(
            description="The domain's phase; Deleted is the last event of a domain that is gone.",
            extra_json_schema=one_of(DomainPhase),
        ),
    ] = DomainPhase.PENDING.value
    clique: Annotated[
        str, Meta(description="The clique of a domain in one clique; empty when in several.")
    ] = ""
    channel: Annotated[
        int | None,
        Meta(description="IMEX channel of a domain in one clique, unique in it; else null."),
    ] = None
    size: Annotated[int, Meta(description="Pods the domain's workload wants.", ge=0)] = 0
    members: tuple[DomainMember, ...] = ()
    slices: Annotated[
        tuple[DomainSlice, ...], Meta(description="The domain's slices, by index.")
    ] = ()
    reason: Annotated[str, Meta(description="Why the domain is in this phase.")] = ""


class NodeCapacity(msgspec.Struct, frozen=True, kw_only=True):
    """Free capacity of one node in a clique."""

    node: NodeName
    slot: Annotated[int, Meta(description="IMEX slot (tray index) in the clique.", ge=0)]
    gpus_total: Annotated[int, Meta(ge=0)]
    gpus_free: Annotated[int, Meta(ge=0)]
    schedulable: bool = True
    healthy: bool = True


class CliqueCapacity(Event, frozen=True, kw_only=True, tag="dev.cdo.v1.clique.capacity"):
    """What a clique can still take: its nodes, free GPUs and channels."""

    subject_template: ClassVar[SubjectTemplate] = subjects.CLIQUE_CAPACITY
    snapshot_template: ClassVar[SubjectTemplate | None] = subjects.CLIQUE_SNAPSHOT

    clique: CliqueId
    cluster_uuid: Annotated[str, Meta(description="NVLink domain (rack) UUID.")] = ""
    nodes: tuple[NodeCapacity, ...] = ()
    gpus_total: Annotated[int, Meta(ge=0)] = 0
    gpus_free: Annotated[int, Meta(ge=0)] = 0
    domains: Annotated[int, Meta(description="ComputeDomains placed in the clique.", ge=0)] = 0
    channels_free: Annotated[int, Meta(description="IMEX channels still free.", ge=0)] = 0
    nodes_total: Annotated[int, Meta(description="Nodes in the clique.", ge=0)] = 0
    nodes_healthy: Annotated[
        int, Meta(description="Nodes that take new pods: healthy and not cordoned.", ge=0)
    ] = 0
    nodes_free: Annotated[
        int, Meta(description="Nodes that take new pods and have at least one free GPU.", ge=0)
    ] = 0
    gpus_healthy: Annotated[
        int, Meta(description="GPUs of the nodes that take new pods.", ge=0)
    ] = 0
    largest_free_block: Annotated[
        int,
        Meta(
            description="Most free GPUs on one node that takes new pods: the largest pod that "
            "fits now.",
            ge=0,
        ),
    ] = 0
    whole_free_nodes: Annotated[
        int, Meta(description="Nodes that take new pods with every GPU free.", ge=0)
    ] = 0
    stranded_gpus: Annotated[
        int,
        Meta(
            description="GPUs no reservation holds that new pods cannot use: free GPUs on "
            "unhealthy or cordoned nodes.",
            ge=0,
        ),
    ] = 0


class NodeFault(Event, frozen=True, kw_only=True, tag="dev.cdo.v1.node.fault"):
    """A GPU, NVLink or fabric fault on a node."""

    subject_template: ClassVar[SubjectTemplate] = subjects.NODE_FAULT
    snapshot_template: ClassVar[SubjectTemplate | None] = subjects.NODE_HEALTH_SNAPSHOT

    node: NodeName
    clique: CliqueId = ""
    gpus: GpuUuids = ()
    signal: Annotated[
        str,
        Meta(description="Family of the health signal.", extra_json_schema=one_of(FaultSignal)),
    ]
    code: Annotated[int, Meta(description="XID number or signal-specific code.")] = 0
    severity: Annotated[
        str, Meta(description="How bad it is.", extra_json_schema=one_of(FAULT_SEVERITIES))
    ]
    action: Annotated[
        str, Meta(description="The recovery it calls for.", extra_json_schema=one_of(Action))
    ] = Action.NONE.value
    message: str = ""
    gpu_index: Annotated[
        int | None,
        Meta(description="NVML index of the GPU the fault is about; null for node-wide faults."),
    ] = None
    scope: Annotated[
        str,
        Meta(
            description="node: the node reacts (its fault taint); gpu: only the pods holding "
            "the GPU are affected (evicted, or a DRA device taint).",
            extra_json_schema=one_of(FaultScope),
        ),
    ] = FaultScope.NODE.value


class NodeRecovered(Event, frozen=True, kw_only=True, tag="dev.cdo.v1.node.recovered"):
    """A node's earlier faults cleared; it is healthy again."""

    subject_template: ClassVar[SubjectTemplate] = subjects.NODE_RECOVERED
    snapshot_template: ClassVar[SubjectTemplate | None] = subjects.NODE_HEALTH_SNAPSHOT

    node: NodeName
    clique: CliqueId = ""
    gpus: GpuUuids = ()
    signals: Annotated[
        tuple[Annotated[str, Meta(extra_json_schema=one_of(FaultSignal))], ...],
        Meta(description="Families of the signals that cleared."),
    ] = ()
    message: str = ""


class ImexPeer(msgspec.Struct, frozen=True, kw_only=True):
    """One peer as the node's IMEX daemon sees it."""

    node: NodeName
    address: str = ""
    state: Annotated[str, Meta(description="Connection state as nvidia-imex-ctl reports it.")]


class NodeImexState(Event, frozen=True, kw_only=True, tag="dev.cdo.v1.node.imex"):
    """The state of a node's IMEX daemon and of its view of the clique's IMEX domain."""

    subject_template: ClassVar[SubjectTemplate] = subjects.NODE_IMEX
    snapshot_template: ClassVar[SubjectTemplate | None] = subjects.NODE_IMEX_SNAPSHOT

    node: NodeName
    clique: CliqueId = ""
    daemon_state: Annotated[
        str,
        Meta(description="The node's IMEX daemon.", extra_json_schema=one_of(ImexDaemonState)),
    ]
    domain_state: Annotated[
        str,
        Meta(
            description="The IMEX domain as the daemon sees it.",
            extra_json_schema=one_of(ImexDomainState),
        ),
    ] = ImexDomainState.UNKNOWN.value
    peers: tuple[ImexPeer, ...] = ()
    config_digest: Annotated[str, Meta(description="Digest of the rendered node map.")] = ""
    restarts: Annotated[int, Meta(description="Daemon restarts since the agent started.")] = 0
