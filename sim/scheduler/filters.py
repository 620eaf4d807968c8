"""Per-node filters: pure functions that say why a pod cannot go to a node, or nothing.

Each returns the reasons (kube-scheduler's wording, which the unschedulable message counts)
or an empty tuple when the node passes. They run in kube-scheduler's order, and a node stops
at its first failing filter; :func:`node_filter_reasons` runs the ones that need no cluster-wide
state (inter-pod affinity and DRA are in their own modules).
"""

from __future__ import annotations

from shared.kube.models import Taint
from shared.scheduling.requests import PODS, insufficient
from shared.scheduling.selectors import pod_matches_node
from shared.scheduling.taints import tolerated, untolerated_taint
from sim.scheduler.facts import TAINT_UNSCHEDULABLE, NodeFacts, NodeUsage, PodFacts

UNSCHEDULABLE = "node(s) were unschedulable"
NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
TOO_MANY_PODS = "Too many pods"

Reasons = tuple[str, ...]


def filter_unschedulable(pod: PodFacts, node: NodeFacts) -> Reasons:
    if not node.unschedulable:
        return ()
    taint = Taint(key=TAINT_UNSCHEDULABLE, effect="NoSchedule")
    return () if tolerated(pod.tolerations, taint) else (UNSCHEDULABLE,)


def filter_taints(pod: PodFacts, node: NodeFacts) -> Reasons:
    """The first NoSchedule/NoExecute taint the pod does not tolerate (PreferNoSchedule is
    only a preference and never filters)."""
    taint = untolerated_taint(node.taints, pod.tolerations)
    if taint is None:
        return ()
    return (f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}",)


def filter_node_affinity(pod: PodFacts, node: NodeFacts) -> Reasons:
    """``spec.nodeSelector`` and required node affinity, both of which must hold."""
    if pod_matches_node(pod.node_selector, pod.node_affinity, name=node.name, labels=node.labels):
        return ()
    return (NODE_AFFINITY,)


def filter_resources(pod: PodFacts, node: NodeFacts, usage: NodeUsage) -> Reasons:
    """Every resource the pod requests that the node's allocatable minus its pods' requests
    cannot cover, plus the pod count when the node limits it."""
    short = insufficient(
        pod.requests, allocatable=node.allocatable, requested=usage.requested, pods=usage.pods
    )
    return tuple(TOO_MANY_PODS if name == PODS else f"Insufficient {name}" for name in short)


def node_filter_reasons(pod: PodFacts, node: NodeFacts, usage: NodeUsage) -> Reasons:
    """The node-local filters in order; the first that fails gives the reasons."""
    return (
        filter_unschedulable(pod, node)
        or filter_taints(pod, node)
        or filter_node_affinity(pod, node)
        or filter_resources(pod, node, usage)
    )
