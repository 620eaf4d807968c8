"""A clique's state as one gang sees it, under the limits its pods' own constraints set (pure).

The planner works out, from the gang's pod specs, which nodes its pods can be scheduled on and
how many of them each node holds by CPU, memory, ephemeral storage and pod count
(:class:`~services.clique_allocator.placement.model.NodeLimits`). Here those limits become a
clique state the rest of the engine reads unchanged: excluded nodes leave the clique, a capped
node shows no more free GPUs than the domain's pods still allowed there take, nodes of higher
preferred weight come first among equals, and the clique's size when empty (for the gang's pod
size only) counts the caps.
A node's cap counts the domain's own pods already there, so as the engine adds pods to a node
the room it shows shrinks with them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from services.clique_allocator.placement.model import NodeLimits, Reservation
from services.clique_allocator.placement.state import CliqueState, NodeState, derive_clique_state


def own_pods(reservations: Iterable[Reservation]) -> dict[str, int]:
    """Pods per node of one domain's reservations."""
    pods: dict[str, int] = {}
    for reservation in reservations:
        for share in reservation.shares:
            pods[share.node] = pods.get(share.node, 0) + share.pods
    return pods


def limit_state(
    state: CliqueState, limits: NodeLimits, *, own: Mapping[str, int], gpus_per_pod: int
) -> CliqueState:
    """``state`` as the gang with ``limits`` sees it (see the module docstring)."""
    nodes: list[NodeState] = []
    for node in state.nodes:
        if node.name in limits.excluded:
            continue
        most = limits.most_pods.get(node.name)
        if most is not None:
            room = max(0, most - own.get(node.name, 0)) * gpus_per_pod
            if room < node.free:
                node = msgspec.structs.replace(node, free=room)
        nodes.append(node)
    limited = derive_clique_state(
        state.id,
        tuple(nodes),
        channels=state.domain_channels,
        lowest_free_channel=state.lowest_free_channel,
        preferred=limits.preferred,
    )
    empty = _empty_capacity(limited, limits.most_pods, gpus_per_pod)
    return msgspec.structs.replace(limited, empty_capacities={gpus_per_pod: empty})


def _empty_capacity(state: CliqueState, most_pods: Mapping[str, int], gpus: int) -> tuple[int, int]:
    """(pods, nodes) of the gang's pod size the clique's remaining nodes take when empty, caps
    counted (the only pod size the gang's view is asked about)."""
    if not most_pods:
        return state.size_capacity(gpus)
    pods = nodes = 0
    for node in state.nodes:
        if node.gpus % gpus:
            continue
        fits = min(node.gpus // gpus, most_pods.get(node.name, node.gpus))
        if fits > 0:
            pods += fits
            nodes += 1
    return pods, nodes
