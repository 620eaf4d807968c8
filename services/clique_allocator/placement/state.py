"""A clique's derived state: free GPUs per node, nodes grouped by free GPUs, channels in use.

Built once per change of the clique or of a reservation touching it, then read by every
decision, so a decision costs a few operations per clique rather than a walk over its nodes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from services.clique_allocator.placement.model import MAX_CHANNELS, Clique, Reservation


class NodeState(msgspec.Struct, frozen=True, kw_only=True):
    """A node with its free GPUs: its size less every reservation's share of it."""

    name: str
    slot: int
    gpus: int
    free: int
    usable: bool
    healthy: bool = True
    """Ready, no fault (a node that is only cordoned is healthy but not usable)."""
    overcommitted: bool = False
    """Reservations hold more GPUs than the node has now (a GPU went unhealthy and left its
    allocatable): a free slot there can no longer be filled."""


class Bucket(msgspec.Struct, frozen=True, kw_only=True):
    """Usable nodes of one size with the same number of free GPUs, in slot order."""

    free: int
    gpus: int
    nodes: tuple[int, ...]
    """Indices into :attr:`CliqueState.nodes`."""

    def pods_per_node(self, gpus_per_pod: int) -> int:
        """Pods of this shape one node of the bucket can still take."""
        return 0 if self.gpus % gpus_per_pod else self.free // gpus_per_pod


class CliqueState(msgspec.Struct, frozen=True, kw_only=True):
    """Everything a decision reads about one clique."""

    id: str
    nodes: tuple[NodeState, ...]
    """In slot order (then name, should two nodes claim one slot)."""
    buckets: tuple[Bucket, ...]
    """Usable nodes with free GPUs, by ascending (free GPUs, node size)."""
    node_sizes: tuple[tuple[int, int], ...]
    """(GPUs per node, number of nodes) over every node, usable or not."""
    domain_channels: Mapping[str, int]
    """Channel of each domain holding a reservation in this clique."""
    lowest_free_channel: int | None
    """The channel a domain new to this clique gets; None when all are in use."""
    free_gpus: int
    """Free GPUs on usable nodes."""
    capacities: Mapping[int, int]
    """Pods the clique can take now, per pod size that divides one of its node sizes."""
    empty_capacities: Mapping[int, tuple[int, int]] | None = None
    """(pods, nodes) per pod size if the clique were empty, where the gang's limits cap
    nodes (``limits.py``); None: every node takes as many pods as its GPUs do."""

    @property
    def channels_in_use(self) -> int:
        return len(set(self.domain_channels.values()))

    def capacity(self, gpus_per_pod: int) -> int:
        """Pods of ``gpus_per_pod`` GPUs the clique can take now, on any number of nodes."""
        return self.capacities.get(gpus_per_pod, 0)

    def size_capacity(self, gpus_per_pod: int) -> tuple[int, int]:
        """(pods, nodes) of ``gpus_per_pod`` GPUs the clique could take if empty and healthy."""
        if self.empty_capacities is not None:
            return self.empty_capacities.get(gpus_per_pod, (0, 0))
        fitting = [(gpus, count) for gpus, count in self.node_sizes if gpus % gpus_per_pod == 0]
        return (
            sum(count * (gpus // gpus_per_pod) for gpus, count in fitting),
            sum(count for _, count in fitting),
        )

    def channel_for(self, domain: str) -> int | None:
        """The domain's channel here: the one it already has, else the lowest free one."""
        return self.domain_channels.get(domain, self.lowest_free_channel)

    def whole_free_nodes(self) -> int:
        """Usable nodes with every GPU free: the blocks whole-node gangs need."""
        return sum(len(bucket.nodes) for bucket in self.buckets if bucket.free == bucket.gpus)


def build_clique_state(clique: Clique, reservations: Iterable[Reservation]) -> CliqueState:
    """Derive a clique's state from its nodes and the reservations that touch it.

    A reservation touches a clique when it is made in the clique (its channel is the clique's)
    or holds a share of one of the clique's nodes. Shares count on whichever clique their node
    is in now, so a node that changed cliques never looks free while pods still hold it. A
    node holding more than it has (its GPU count dropped) simply has no free GPUs.
    """
    ordered = sorted(clique.nodes, key=lambda node: (node.slot, node.name))
    names = {node.name for node in ordered}
    reserved = dict.fromkeys(names, 0)
    channels: dict[str, int] = {}
    used: set[int] = set()
    for reservation in sorted(reservations, key=lambda r: (r.domain, r.slice_index)):
        if reservation.clique == clique.id:
            channels.setdefault(reservation.domain, reservation.channel)
            used.add(reservation.channel)
        for share in reservation.shares:
            if share.node in names:
                reserved[share.node] += share.pods * reservation.gpus_per_pod
    nodes = tuple(
        NodeState(
            name=node.name,
            slot=node.slot,
            gpus=node.gpus,
            free=max(0, node.gpus - reserved[node.name]),
            usable=node.usable,
            healthy=node.healthy,
            overcommitted=reserved[node.name] > node.gpus,
        )
        for node in ordered
    )
    return derive_clique_state(
        clique.id,
        nodes,
        channels=channels,
        lowest_free_channel=next((c for c in range(MAX_CHANNELS) if c not in used), None),
    )


def derive_clique_state(
    clique_id: str,
    nodes: tuple[NodeState, ...],
    *,
    channels: Mapping[str, int],
    lowest_free_channel: int | None,
    preferred: Mapping[str, int] | None = None,
) -> CliqueState:
    """A clique's state from its nodes' free GPUs; within a bucket, nodes of higher
    ``preferred`` weight come first (then slot order)."""
    buckets = _buckets(nodes, preferred)
    sizes = _node_sizes(nodes)
    pod_sizes = {g for size, _ in sizes for g in range(1, size + 1) if size % g == 0}
    return CliqueState(
        id=clique_id,
        nodes=nodes,
        buckets=buckets,
        node_sizes=sizes,
        domain_channels=channels,
        lowest_free_channel=lowest_free_channel,
        free_gpus=sum(bucket.free * len(bucket.nodes) for bucket in buckets),
        capacities={
            g: sum(len(bucket.nodes) * bucket.pods_per_node(g) for bucket in buckets)
            for g in sorted(pod_sizes)
        },
    )


def _buckets(
    nodes: tuple[NodeState, ...], preferred: Mapping[str, int] | None
) -> tuple[Bucket, ...]:
    grouped: dict[tuple[int, int], list[int]] = {}
    for index, node in enumerate(nodes):
        if node.usable and node.free > 0:
            grouped.setdefault((node.free, node.gpus), []).append(index)
    if preferred:
        for members in grouped.values():
            members.sort(key=lambda index: -preferred.get(nodes[index].name, 0))
    return tuple(
        Bucket(free=free, gpus=gpus, nodes=tuple(grouped[free, gpus]))
        for free, gpus in sorted(grouped)
    )


def _node_sizes(nodes: tuple[NodeState, ...]) -> tuple[tuple[int, int], ...]:
    counts: dict[int, int] = {}
    for node in nodes:
        counts[node.gpus] = counts.get(node.gpus, 0) + 1
    return tuple(sorted(counts.items()))
