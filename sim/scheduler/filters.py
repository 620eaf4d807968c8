"""Per-node filters: pure functions that say why a pod cannot go to a node, or nothing.

Each returns the reasons (kube-scheduler's wording, which the unschedulable message counts)
or an empty tuple when the node passes. They run in kube-scheduler's order, and a node stops
at its first failing filter; :func:`node_filter_reasons` runs the ones that need no cluster-wide
state (inter-pod affinity and DRA are in their own modules).
"""

from __future__ import annotations

from collections.abc import Iterable

from shared.kube.models import Taint, Toleration
from sim.scheduler.facts import PODS, TAINT_UNSCHEDULABLE, NodeFacts, NodeUsage, PodFacts
from sim.scheduler.selectors import node_selector_matches

UNSCHEDULABLE = "node(s) were unschedulable"
NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
TOO_MANY_PODS = "Too many pods"
_FILTERED_EFFECTS = ("NoSchedule", "NoExecute")

Reasons = tuple[str, ...]


def toleration_matches(toleration: Toleration, taint: Taint) -> bool:
    """Kubernetes' ToleratesTaint: empty effect tolerates every effect; Exists with an empty
    key tolerates every taint."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    if toleration.operator in ("Equal", ""):
        return toleration.value == taint.value
    return False


def tolerated(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    return any(toleration_matches(t, taint) for t in tolerations)


def filter_unschedulable(pod: PodFacts, node: NodeFacts) -> Reasons:
    if not node.unschedulable:
        return ()
    taint = Taint(key=TAINT_UNSCHEDULABLE, effect="NoSchedule")
    return () if tolerated(pod.tolerations, taint) else (UNSCHEDULABLE,)


def filter_taints(pod: PodFacts, node: NodeFacts) -> Reasons:
    """The first NoSchedule/NoExecute taint the pod does not tolerate (PreferNoSchedule is
    only a preference and never filters)."""
    for taint in node.taints:
        if taint.effect in _FILTERED_EFFECTS and not tolerated(pod.tolerations, taint):
            return (f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}",)
    return ()


def filter_node_affinity(pod: PodFacts, node: NodeFacts) -> Reasons:
    """``spec.nodeSelector`` and required node affinity, both of which must hold."""
    labels = node.labels
    for key, value in pod.node_selector.items():
        if labels.get(key) != value:
            return (NODE_AFFINITY,)
    if pod.node_affinity is not None and not node_selector_matches(
        pod.node_affinity, name=node.name, labels=labels
    ):
        return (NODE_AFFINITY,)
    return ()


def filter_resources(pod: PodFacts, node: NodeFacts, usage: NodeUsage) -> Reasons:
    """Every resource the pod requests that the node's allocatable minus its pods' requests
    cannot cover, plus the pod count when the node limits it."""
    reasons: list[str] = []
    allocatable = node.allocatable
    if PODS in allocatable and usage.pods + 1 > allocatable[PODS] // 1000:
        reasons.append(TOO_MANY_PODS)
    requested = usage.requested
    for resource, amount in pod.requests.items():
        if amount > allocatable.get(resource, 0) - requested.get(resource, 0):
            reasons.append(f"Insufficient {resource}")
    return tuple(reasons)


def node_filter_reasons(pod: PodFacts, node: NodeFacts, usage: NodeUsage) -> Reasons:
    """The node-local filters in order; the first that fails gives the reasons."""
    return (
        filter_unschedulable(pod, node)
        or filter_taints(pod, node)
        or filter_node_affinity(pod, node)
        or filter_resources(pod, node, usage)
    )
