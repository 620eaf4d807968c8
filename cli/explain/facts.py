"""What ``cdo explain`` reads, as plain data: the facts about one domain (and its pods) that the
explanation is computed from (:mod:`cli.explain.explain`). Built by :mod:`cli.explain.collect`
from the Kubernetes API and the NATS snapshots; tests build them by hand."""

from __future__ import annotations

from datetime import datetime

import msgspec


class ConditionFact(msgspec.Struct, frozen=True, kw_only=True):
    type: str
    status: str
    reason: str = ""
    message: str = ""


class PodFact(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    phase: str = ""
    node: str = ""
    """The node it is bound to, else the one the allocator pinned it to, else ""."""
    gated: bool = False
    """It still carries the allocator's scheduling gate."""
    placed: ConditionFact | None = None
    """Its ``cdo.dev/Placed`` condition, written by the allocator."""
    scheduled: ConditionFact | None = None
    """Its ``PodScheduled`` condition, written by the scheduler."""


class NodeFact(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    clique: str = ""
    ready: ConditionFact | None = None
    gpu_healthy: ConditionFact | None = None
    imex_ready: ConditionFact | None = None
    taints: tuple[str, ...] = ()
    """``key=value:effect`` of each taint."""
    gpus: int = 0
    """Allocatable ``nvidia.com/gpu``."""


class SliceFact(msgspec.Struct, frozen=True, kw_only=True):
    index: int
    clique: str
    channel: int
    unit: str = ""
    """The gang unit (an LWS group) the slice belongs to; ranks count within it."""
    first_rank: int = 0
    size: int = 0
    nodes: tuple[str, ...] = ()
    slots: int = 0
    placed_pods: int = 0
    channel_only: int = 0
    """Pods without GPUs (only the channel) seated in the slice."""
    waiting_since: datetime | None = None
    moved_from: str = ""


class PlacementFact(msgspec.Struct, frozen=True, kw_only=True):
    gpus_per_pod: int
    size: int
    multi_node_nvlink: bool = True
    slices: tuple[SliceFact, ...] = ()


class CliqueFact(msgspec.Struct, frozen=True, kw_only=True):
    """Capacity of one clique, from its ``CliqueCapacity`` snapshot or computed from nodes."""

    clique: str
    nodes_total: int
    nodes_healthy: int
    gpus_total: int
    gpus_free: int
    largest_free_block: int
    domains: int = 0
    channels_free: int | None = None
    """Unknown (None) when computed from nodes: channels are the allocator's to count."""
    source: str = "snapshot"
    """``snapshot`` (NATS) or ``nodes`` (computed from the Kubernetes API)."""
    as_of: datetime | None = None


class ImexFact(msgspec.Struct, frozen=True, kw_only=True):
    """A node's ``NodeImexState`` snapshot (the IMEX agent's)."""

    node: str
    daemon_state: str
    domain_state: str
    peers_connected: int = 0
    peers: int = 0


class EventFact(msgspec.Struct, frozen=True, kw_only=True):
    kind: str
    name: str
    type: str
    reason: str
    message: str
    count: int = 1
    last: datetime | None = None
    component: str = ""


class DomainFacts(msgspec.Struct, frozen=True, kw_only=True):
    namespace: str
    name: str
    phase: str = ""
    conditions: tuple[ConditionFact, ...] = ()
    placement: PlacementFact | None = None
    pods: tuple[PodFact, ...] = ()
    nodes: tuple[NodeFact, ...] = ()
    cliques: tuple[CliqueFact, ...] = ()
    imex: tuple[ImexFact, ...] = ()
    events: tuple[EventFact, ...] = ()
    pod: str = ""
    """``cdo explain pod/NAME``: the pod asked about ("" for the whole domain)."""
    notes: tuple[str, ...] = ()
