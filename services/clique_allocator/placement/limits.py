"""A clique's state as one gang sees it, under the limits its pods' own constraints set (pure).

The planner works out, from the gang's pod specs, which nodes its pods can be scheduled on and
how many of them each node holds by CPU, memory, ephemeral storage and pod count
(:class:`~services.clique_allocator.placement.model.NodeLimits`). Here those limits become a
clique state the rest of the engine reads unchanged: excluded nodes leave the clique, a capped
node shows no more free GPUs than the domain's pods still allowed there take, nodes of higher
preferred weight come first among equals, and the clique's size when empty counts the caps.
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
    return msgspec.structs.replace(
        limited, empty_capacities=_empty_capacities(limited, limits.most_pods)
    )


def _empty_capacities(
    state: CliqueState, most_pods: Mapping[str, int]
) -> dict[int, tuple[int, int]]:
    """(pods, nodes) per pod size the clique's remaining nodes take when empty, caps counted."""
    sizes = {g for size, _ in state.node_sizes for g in range(1, size + 1) if size % g == 0}
    out: dict[int, tuple[int, int]] = {}
    for gpus in sorted(sizes):
        pods = nodes = 0
        for node in state.nodes:
            if node.gpus % gpus:
                continue
            fits = min(node.gpus // gpus, most_pods.get(node.name, node.gpus))
            if fits > 0:
                pods += fits
                nodes += 1
        out[gpus] = (pods, nodes)
    return out
