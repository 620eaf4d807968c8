"""Packing pods onto a clique's nodes when the gang may span any number of them.

The rule: take usable nodes by ascending free GPUs (best fit), and give each node as many pods
as it still takes before moving on. Partly used nodes fill up first and whole free nodes are
broken last. Ties go to the node already hosting the slice (growth keeps a domain on few
nodes), then to the lower tray slot, then to the node name.

Whole-node pods (GPUs per pod = node size) can only use whole free nodes, which all tie on free
GPUs, so they take the lowest free tray slots. Inside a clique every tray reaches every other
through the NVSwitch trays at the same bandwidth, so no choice is faster than another; slot
order keeps a gang on a contiguous run of trays where it can, and the free trays together.

The plan is made on buckets (nodes grouped by free GPUs) so that scoring a clique costs a few
steps whatever its size; :func:`materialize` then names the nodes for the chosen clique.
"""

from __future__ import annotations

from typing import NamedTuple

from services.clique_allocator.placement.state import CliqueState


class FillStep(NamedTuple):
    """Put ``pods_each`` pods on each of ``nodes`` nodes of bucket ``bucket``."""

    bucket: int
    nodes: int
    pods_each: int


def plan_fill(state: CliqueState, *, pods: int, gpus_per_pod: int) -> tuple[FillStep, ...] | None:
    """How to place ``pods`` pods in the clique, or None when it lacks room."""
    steps: list[FillStep] = []
    remaining = pods
    for index, bucket in enumerate(state.buckets):
        if remaining == 0:
            break
        each = bucket.pods_per_node(gpus_per_pod)
        if each == 0:
            continue
        full = min(len(bucket.nodes), remaining // each)
        if full:
            steps.append(FillStep(bucket=index, nodes=full, pods_each=each))
            remaining -= full * each
        if remaining and full < len(bucket.nodes):
            # Fewer pods left than a node takes: the next node of this bucket takes them all.
            steps.append(FillStep(bucket=index, nodes=1, pods_each=remaining))
            remaining = 0
    return tuple(steps) if remaining == 0 else None


def materialize(
    state: CliqueState, steps: tuple[FillStep, ...], *, hosting: frozenset[str]
) -> dict[int, int]:
    """New pods per node index for a plan; nodes in ``hosting`` go first within a bucket."""
    placed: dict[int, int] = {}
    taken: dict[int, int] = {}
    for step in steps:
        members = state.buckets[step.bucket].nodes
        if hosting:
            members = tuple(
                sorted(members, key=lambda index: state.nodes[index].name not in hosting)
            )
        start = taken.get(step.bucket, 0)
        for index in members[start : start + step.nodes]:
            placed[index] = step.pods_each
        taken[step.bucket] = start + step.nodes
    return placed
