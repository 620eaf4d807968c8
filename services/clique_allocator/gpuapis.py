"""Which way a gang asks for GPUs, and the nodes that can serve it (pure functions).

A pod asks for GPUs through the device plugin (``nvidia.com/gpu``), through claims of NVIDIA's
GPU DRA driver, or both (``dragpus.PodGpus``). A claim with allocationMode ``All`` takes every
GPU of its node: such a pod counts as the largest node size of the cluster, so it goes only
where it fills a node. The allocator seats a gang's pods in slots by rank, whatever their way,
so a gang is placed only on nodes that serve every way its pods use: a gang of device-plugin
pods on nodes with allocatable ``nvidia.com/gpu``, of DRA pods on nodes publishing DRA GPUs,
and a gang that mixes both on nodes that serve both (topology ``gpu_api: both``).
:func:`restrict` gives the engine a view in which the other nodes take no new pods; what they
hold stays counted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from services.clique_allocator.dragpus import ClaimSpecLookup, PodGpus, pod_gpus
from services.clique_allocator.nodes import DEVICE_PLUGIN, DRA, NodeFacts
from services.clique_allocator.placement import Clique, ClusterView, Node
from shared.kube.models import Pod


def pod_asks(pods: Iterable[Pod], claim_spec: ClaimSpecLookup) -> dict[str, PodGpus]:
    """Per pod name, what it asks for."""
    return {pod.metadata.name: pod_gpus(pod, claim_spec) for pod in pods}


def gpu_counter(asks: Mapping[str, PodGpus], view: ClusterView) -> Callable[[Pod], int]:
    """GPUs per pod: ``All`` claims count as the cluster's largest node."""
    largest = max(view.node_sizes, default=0)

    def gpus_of(pod: Pod) -> int:
        ask = asks.get(pod.metadata.name)
        return pod.gpus() if ask is None else ask.total(largest)

    return gpus_of


def channel_only_test(asks: Mapping[str, PodGpus]) -> Callable[[Pod], bool]:
    """Whether a pod asks for no GPU at all, only for its domain's channel (a pod whose asks
    are not known is judged by its ``nvidia.com/gpu`` alone)."""

    def channel_only(pod: Pod) -> bool:
        ask = asks.get(pod.metadata.name)
        return pod.gpus() == 0 if ask is None else ask.channel_only

    return channel_only


def apis_needed(asks: Iterable[PodGpus]) -> frozenset[str]:
    """The ways of asking for GPUs that the gang's pods use."""
    needed: set[str] = set()
    for ask in asks:
        if ask.device_plugin > 0:
            needed.add(DEVICE_PLUGIN)
        if ask.uses_dra:
            needed.add(DRA)
    return frozenset(needed)


def restrict(
    view: ClusterView, facts: Mapping[str, NodeFacts], needed: frozenset[str]
) -> ClusterView:
    """``view`` with nodes that do not serve every way in ``needed`` taking no new pods."""
    unfit = {name for name, found in facts.items() if not needed <= found.gpu_apis}
    if not unfit:
        return view
    for state in view.cliques:
        if not any(node.name in unfit for node in state.nodes):
            continue
        view = view.with_clique(
            Clique(
                id=state.id,
                nodes=tuple(
                    Node(
                        name=node.name,
                        slot=node.slot,
                        gpus=node.gpus,
                        healthy=node.healthy,
                        # A node kept out only by cordon or by its GPU way: not schedulable.
                        schedulable=node.usable and node.name not in unfit,
                    )
                    for node in state.nodes
                ),
            )
        )
    return view
