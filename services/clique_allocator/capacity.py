"""Clique capacity events: what each clique can still take, from the engine's view (pure).

Per clique, over its nodes (a node "takes new pods" when it is healthy and not cordoned):

| field | meaning |
|---|---|
| ``nodes_total`` / ``gpus_total`` | every node of the clique and its GPUs |
| ``nodes_healthy`` / ``gpus_healthy`` | nodes that take new pods, and their GPUs |
| ``nodes_free`` | nodes that take new pods with at least one free GPU |
| ``gpus_free`` | free GPUs on nodes that take new pods |
| ``largest_free_block`` | most free GPUs on one such node: the largest pod that fits now |
| ``whole_free_nodes`` | such nodes with every GPU free |
| ``stranded_gpus`` | free GPUs on nodes that take no new pods (fault, NotReady, cordoned) |
| ``domains`` / ``channels_free`` | domains holding a channel in the clique; channels left |

"Free" means held by no Placement and no pod outside one. ``nodes`` lists every node with its
slot, GPUs, free GPUs, health and schedulability.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

import msgspec

from services.clique_allocator.nodes import NodeFacts
from services.clique_allocator.placement import MAX_CHANNELS, CliqueState, ClusterView
from shared.events import CliqueCapacity, Event, NodeCapacity

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def clique_capacity(state: CliqueState, facts: Mapping[str, NodeFacts]) -> CliqueCapacity:
    nodes = []
    cluster_uuid = ""
    for node in state.nodes:
        known = facts.get(node.name)
        if known is not None and known.cluster_uuid:
            cluster_uuid = cluster_uuid or known.cluster_uuid
        nodes.append(
            NodeCapacity(
                node=node.name,
                slot=node.slot,
                gpus_total=node.gpus,
                gpus_free=node.free,
                healthy=known.healthy if known is not None else node.usable,
                schedulable=known.schedulable if known is not None else node.usable,
            )
        )
    usable = [node for node in state.nodes if node.usable]
    return CliqueCapacity(
        clique=state.id,
        cluster_uuid=cluster_uuid,
        nodes=tuple(nodes),
        gpus_total=sum(node.gpus for node in state.nodes),
        gpus_free=sum(node.free for node in usable),
        domains=len(state.domain_channels),
        channels_free=MAX_CHANNELS - state.channels_in_use,
        nodes_total=len(state.nodes),
        nodes_healthy=len(usable),
        nodes_free=sum(1 for node in usable if node.free > 0),
        gpus_healthy=sum(node.gpus for node in usable),
        largest_free_block=max((node.free for node in usable), default=0),
        whole_free_nodes=sum(1 for node in usable if node.free == node.gpus),
        stranded_gpus=sum(node.free for node in state.nodes if not node.usable),
    )


def capacity_events(view: ClusterView, facts: Mapping[str, NodeFacts]) -> list[CliqueCapacity]:
    """One event per clique of the view, in clique order."""
    return [clique_capacity(state, facts) for state in view.cliques]


def content(event: CliqueCapacity) -> bytes:
    """The event without its identity (id, time, source): equal content, same state."""
    return msgspec.json.encode(msgspec.structs.replace(event, id="", time=_EPOCH, source=""))


class CapacityLedger:
    """What was last published per clique; a new leader fills it from the KV snapshots."""

    def __init__(self) -> None:
        self._published: dict[str, bytes] = {}

    def load(self, events: Iterable[Event]) -> None:
        for event in events:
            if isinstance(event, CliqueCapacity):
                self._published[event.clique] = content(event)

    def changes(self, events: Iterable[CliqueCapacity]) -> list[CliqueCapacity]:
        """The events that say something new, plus an empty one for each clique that is gone
        (its snapshot then says it has no nodes)."""
        out = []
        current = set()
        for event in events:
            current.add(event.clique)
            if self._published.get(event.clique) != content(event):
                out.append(event)
        for clique in sorted(set(self._published) - current):
            gone = CliqueCapacity(clique=clique)
            if self._published[clique] != content(gone):
                out.append(gone)
        return out

    def record(self, event: CliqueCapacity) -> None:
        self._published[event.clique] = content(event)
