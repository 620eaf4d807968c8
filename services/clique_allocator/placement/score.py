"""How much a placement costs the clique that takes it, for choosing among cliques.

A clique's capacity for a pod shape (GPUs per pod) is how many such pods its free GPUs could
still hold; for the largest shape (4 GPUs on GB200 trays) that is its free whole nodes. The
engine scores each clique with room by the state the placement would leave, and takes the
smallest score, compared as a tuple:

1. whole free nodes lost (capacity lost for the largest shape): pods that fit in holes on
   partly used nodes never break a whole node anywhere;
2. whole free nodes left in the clique (fewer first): best fit, so gangs finish off cliques
   already in use and empty cliques stay empty for the gangs that need a whole rack;
3. capacity lost for each smaller shape, larger first (2-GPU pairs, then single GPUs): of two
   cliques that lose no whole node, the one whose plan breaks fewer free pairs (a 1-GPU pod on
   a node with 3 free GPUs rather than one with 2) keeps more room for 2-GPU pods;
4. free GPUs left in the clique (fewer first): best fit again, by GPUs;
5. the clique id, so equal cliques are taken in a fixed order.
"""

from __future__ import annotations

from collections.abc import Iterable

from services.clique_allocator.placement.fill import FillStep
from services.clique_allocator.placement.state import CliqueState

Score = tuple[int | str, ...]


def pod_shapes(node_sizes: Iterable[int]) -> tuple[int, ...]:
    """Every pod size (divisor of a node size) in the cluster, largest first."""
    return tuple(
        sorted(
            {shape for size in node_sizes for shape in range(1, size + 1) if size % shape == 0},
            reverse=True,
        )
    )


def score_fill(
    state: CliqueState,
    steps: tuple[FillStep, ...],
    *,
    shapes: tuple[int, ...],
    gpus_per_pod: int,
    pods: int,
) -> Score:
    """Score of a bucket plan (see the module docstring)."""
    changes = [
        (bucket.gpus, bucket.free, bucket.free - step.pods_each * gpus_per_pod, step.nodes)
        for step in steps
        for bucket in (state.buckets[step.bucket],)
    ]
    return _score(state, changes, shapes=shapes, used=pods * gpus_per_pod)


def score_nodes(
    state: CliqueState,
    placed: dict[int, int],
    *,
    shapes: tuple[int, ...],
    gpus_per_pod: int,
) -> Score:
    """Score of new pods per node index (see the module docstring)."""
    changes = []
    for index, pods in placed.items():
        node = state.nodes[index]
        changes.append((node.gpus, node.free, node.free - pods * gpus_per_pod, 1))
    used = sum(placed.values()) * gpus_per_pod
    return _score(state, changes, shapes=shapes, used=used)


def _score(
    state: CliqueState,
    changes: list[tuple[int, int, int, int]],
    *,
    shapes: tuple[int, ...],
    used: int,
) -> Score:
    """``changes``: (node size, free before, free after, number of such nodes)."""
    lost = tuple(
        sum(
            count * (before // shape - after // shape)
            for size, before, after, count in changes
            if size % shape == 0
        )
        for shape in shapes
    )
    if not lost:
        return (state.free_gpus - used, state.id)
    largest_left = state.capacity(shapes[0]) - lost[0]
    return (lost[0], largest_left, *lost[1:], state.free_gpus - used, state.id)
