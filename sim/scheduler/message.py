"""The PodScheduled=False message, in kube-scheduler's words.

``0/36 nodes are available: 18 Insufficient nvidia.com/gpu, 18 node(s) didn't match pod
affinity rules.`` counts each reason over the nodes that gave it, sorted as text; a pod that
fails before any node is looked at (a claim not created yet) gets that one reason instead.
"""

from __future__ import annotations

from collections.abc import Mapping

NO_NODES = "no nodes available to schedule pods"


def unschedulable_message(
    *, total_nodes: int, reasons: Mapping[str, int], pre_filter: str = ""
) -> str:
    if pre_filter:
        return f"0/{total_nodes} nodes are available: {pre_filter}."
    if total_nodes == 0:
        return NO_NODES
    parts = sorted(f"{count} {reason}" for reason, count in reasons.items())
    return f"0/{total_nodes} nodes are available: {', '.join(parts)}."
