"""Least-allocated scoring: prefer the node that keeps the most of its capacity free.

Like kube-scheduler's NodeResourcesFit ``LeastAllocated`` strategy, with CPU and memory (using
the non-zero stand-ins for pods that request nothing, so such pods spread) and, on nodes that
have them, GPUs, each weighted equally. Scores run from 0 to 100; ties go to the node whose name
sorts first, which keeps decisions reproducible.
"""

from __future__ import annotations

from sim.scheduler.facts import CPU, GPU, MEMORY, NodeFacts, NodeUsage, PodFacts


def _free_share(allocatable: int, requested: int) -> float:
    if allocatable <= 0:
        return 0.0
    return max(0.0, (allocatable - requested) * 100.0 / allocatable)


def least_allocated(pod: PodFacts, node: NodeFacts, usage: NodeUsage) -> float:
    """The node's score for ``pod``, counting the pod as already there."""
    allocatable = node.allocatable
    shares = [
        _free_share(allocatable.get(CPU, 0), usage.nonzero_cpu + pod.nonzero_cpu),
        _free_share(allocatable.get(MEMORY, 0), usage.nonzero_memory + pod.nonzero_memory),
    ]
    gpus = allocatable.get(GPU, 0)
    if gpus > 0:
        shares.append(_free_share(gpus, usage.requested.get(GPU, 0) + pod.requests.get(GPU, 0)))
    return sum(shares) / len(shares)
