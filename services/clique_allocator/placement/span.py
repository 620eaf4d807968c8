"""Placing pods on exactly N nodes of a clique (``spec.numNodes``).

Choosing the nodes: the slice's existing nodes count toward N; the others are picked one at a
time, each time the node with the fewest free GPUs (then lower slot, then name) that still
leaves enough room on the nodes yet to be picked. So the span is met with the smallest
free blocks that can carry the pods, and whole free nodes are taken only when needed.

Spreading the pods: each new pod goes to the chosen node with the fewest pods of the slice
(then fewer free GPUs, then lower slot, then name) that still has room. Pods spread evenly, so
two 36-pod domains asking for 18 nodes each share one rack's 18 nodes, two pods of each per node.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping

import msgspec

from services.clique_allocator.placement.state import CliqueState, NodeState


class SpanRoom(msgspec.Struct, frozen=True, kw_only=True):
    """What a clique offers a slice that must span exactly ``span`` nodes."""

    candidates: tuple[int, ...]
    """Usable new nodes with room for a pod, by (free GPUs, slot, name)."""
    new_nodes: int
    """How many of them the span needs."""
    pods: int
    """Most pods the clique can take on the span; meaningful when enough candidates exist."""


def span_room(
    state: CliqueState,
    *,
    gpus_per_pod: int,
    existing: Mapping[str, int],
    span: int,
    excluded: frozenset[str],
) -> SpanRoom:
    """The nodes a span could use and the most pods it could carry."""
    caps = [_pods_fitting(node, gpus_per_pod) for node in state.nodes]
    candidates = sorted(
        (
            index
            for index, node in enumerate(state.nodes)
            if caps[index] > 0 and node.name not in existing and node.name not in excluded
        ),
        key=lambda index: state.nodes[index].free,
    )
    new_nodes = span - len(existing)
    held = sum(caps[index] for index, node in enumerate(state.nodes) if node.name in existing)
    largest = sorted((caps[index] for index in candidates), reverse=True)[: max(new_nodes, 0)]
    return SpanRoom(candidates=tuple(candidates), new_nodes=new_nodes, pods=held + sum(largest))


def plan_span(
    state: CliqueState,
    room: SpanRoom,
    *,
    pods: int,
    gpus_per_pod: int,
    existing: Mapping[str, int],
) -> dict[int, int] | None:
    """New pods per node index, on exactly the span, or None when the clique cannot do it."""
    if room.new_nodes < 0 or pods < room.new_nodes or len(room.candidates) < room.new_nodes:
        return None
    if room.pods < pods:
        return None
    caps = {index: _pods_fitting(state.nodes[index], gpus_per_pod) for index in room.candidates}
    held = [index for index, node in enumerate(state.nodes) if node.name in existing]
    need = pods - sum(_pods_fitting(state.nodes[index], gpus_per_pod) for index in held)
    chosen = _choose(list(room.candidates), caps, count=room.new_nodes, need=need)
    spread: list[tuple[int, int, int, str, int]] = []
    for index in (*held, *chosen):
        node = state.nodes[index]
        spread.append((existing.get(node.name, 0), node.free, node.slot, node.name, index))
    heapq.heapify(spread)
    left = {index: _pods_fitting(state.nodes[index], gpus_per_pod) for index in (*held, *chosen)}
    placed: dict[int, int] = {}
    for _ in range(pods):
        while spread and left[spread[0][4]] == 0:
            heapq.heappop(spread)
        count, free, slot, name, index = heapq.heappop(spread)
        placed[index] = placed.get(index, 0) + 1
        left[index] -= 1
        heapq.heappush(spread, (count + 1, free - gpus_per_pod, slot, name, index))
    return placed


def _choose(pool: list[int], caps: Mapping[int, int], *, count: int, need: int) -> list[int]:
    """``count`` nodes from ``pool`` (ascending room) with room for ``need`` pods, tightly."""
    chosen: list[int] = []
    for pick in range(count):
        after = count - pick - 1
        ordered = sorted(caps[index] for index in pool)
        largest = sum(ordered[len(ordered) - after :]) if after else 0
        # Room of the best ``after`` others should this node be picked; when the node is
        # itself among the largest, the next largest stands in for it.
        threshold = ordered[len(ordered) - after] if after else None
        with_next = sum(ordered[len(ordered) - after - 1 :]) if after else 0
        for position, index in enumerate(pool):
            cap = caps[index]
            others = with_next - cap if threshold is not None and cap >= threshold else largest
            if cap + others >= need:
                chosen.append(index)
                need -= cap
                del pool[position]
                break
    return chosen


def _pods_fitting(node: NodeState, gpus_per_pod: int) -> int:
    if not node.usable or node.gpus % gpus_per_pod:
        return 0
    return node.free // gpus_per_pod
