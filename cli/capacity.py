"""Capacity per clique: from the allocator's ``CliqueCapacity`` snapshots on NATS, or computed
from the Kubernetes API when NATS has none (pure functions; the reads are the callers').

Computed from the API, a clique's nodes are those with its ``nvidia.com/gpu.clique`` label; a
node takes new pods when it is Ready, not cordoned and without the ``cdo.dev/gpu-fault`` taint;
its GPUs are its allocatable ``nvidia.com/gpu``, less what the Placements hold on it. Channels
are the allocator's to count, so a computed row has none; GPUs published only as DRA devices
are not counted.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from cli.explain.facts import CliqueFact
from shared.crds import Placement
from shared.crds.names import CLIQUE_LABEL, GPU_FAULT_TAINT, GPU_RESOURCE
from shared.events import CliqueCapacity
from shared.kube.models import Node


def from_snapshot(event: CliqueCapacity) -> CliqueFact:
    return CliqueFact(
        clique=event.clique,
        nodes_total=event.nodes_total or len(event.nodes),
        nodes_healthy=event.nodes_healthy,
        gpus_total=event.gpus_total,
        gpus_free=event.gpus_free,
        largest_free_block=event.largest_free_block,
        domains=event.domains,
        channels_free=event.channels_free,
        source="snapshot",
        as_of=event.time,
    )


def node_gpus(node: Node) -> int:
    try:
        return int(node.status.allocatable.get(GPU_RESOURCE, "0"))
    except ValueError:
        return 0


def takes_pods(node: Node) -> bool:
    ready = node.condition("Ready")
    return (
        ready is not None
        and ready.status == "True"
        and not node.spec.unschedulable
        and not any(taint.key == GPU_FAULT_TAINT for taint in node.spec.taints)
    )


def from_nodes(nodes: Sequence[Node], placements: Sequence[Placement]) -> list[CliqueFact]:
    """Each labelled clique's capacity as the API shows it (the module docstring)."""
    held: dict[str, int] = defaultdict(int)
    domains: dict[str, set[str]] = defaultdict(set)
    for placement in placements:
        for piece in placement.spec.all_slices:
            domains[piece.clique].add(placement.key)
            for member in piece.members:
                held[member.node] += member.gpus
    groups: dict[str, list[Node]] = defaultdict(list)
    for node in nodes:
        clique = node.metadata.labels.get(CLIQUE_LABEL, "")
        if clique:
            groups[clique].append(node)
    rows = []
    for clique, members in sorted(groups.items()):
        usable = [node for node in members if takes_pods(node)]
        free = [max(0, node_gpus(node) - held[node.metadata.name]) for node in usable]
        rows.append(
            CliqueFact(
                clique=clique,
                nodes_total=len(members),
                nodes_healthy=len(usable),
                gpus_total=sum(node_gpus(node) for node in members),
                gpus_free=sum(free),
                largest_free_block=max(free, default=0),
                domains=len(domains[clique]),
                channels_free=None,
                source="nodes",
            )
        )
    return rows


def cliques_of(
    snapshots: Sequence[CliqueCapacity], nodes: Sequence[Node], placements: Sequence[Placement]
) -> list[CliqueFact]:
    """The snapshots' capacity where NATS has one; computed from the API for the rest."""
    published = {event.clique: from_snapshot(event) for event in snapshots}
    computed = {row.clique: row for row in from_nodes(nodes, placements)}
    return [published.get(clique) or computed[clique] for clique in sorted({*published, *computed})]
