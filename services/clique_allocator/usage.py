"""What the pods on each GPU node request besides GPUs, for the resource filter (pure).

A node's resources are taken by two kinds of pods, each counted once:

- **slots of Placements**: every pod slot a domain's record holds on the node counts the
  domain's pod (the largest request, resource by resource, of its GPU pods the record names),
  bound yet or not; every pod without GPUs the record seats there counts its own requests.
  The record is written before any pod is pinned, under the allocator's decision
  lock, so a pod pinned a moment ago and not bound yet is counted, and so is a slot still
  waiting for its pod; two decisions can never hand out the same CPU or memory.
- **every other pod bound to the node** (``spec.nodeName``) and not finished: pods of other
  workloads, DaemonSets, a domain's pod scheduled without the allocator. Each counts its own
  requests.

Channel attachment devices (``attachments.py``) are counted the same way: one per slot and per
seated pod without GPUs, and one per holder of an allocated device the records do not name (a
hand-made claim, a pod scheduled without the allocator).

:meth:`UsageTable.others` is what a node holds for everything but one domain, so a gang's cap
on a node counts its own pods there in the cap, not in the use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import msgspec

from services.clique_allocator.eligibility import NO_USE, Neighbour, NodeUse
from services.clique_allocator.needs import pod_requests_of
from services.clique_allocator.objects import finished
from shared.crds.placement import Placement
from shared.kube.models import Pod


class UsageTable(msgspec.Struct, frozen=True, kw_only=True):
    """Per node: the use of unrecorded bound pods, and the use of each domain's slots."""

    bound: dict[str, NodeUse] = msgspec.field(default_factory=dict)
    slots: dict[str, dict[str, NodeUse]] = msgspec.field(default_factory=dict)
    """Per domain key, per node."""
    neighbours: tuple[Neighbour, ...] = ()
    """Pods bound to a GPU node or recorded on one, for anti-affinity."""
    total: dict[str, NodeUse] = msgspec.field(default_factory=dict)
    """Per node, ``bound`` and every domain's slots together."""

    def others(self, domain: str) -> dict[str, NodeUse]:
        """Per node, the use of everything but ``domain``'s slots (its own slots count in its
        caps instead)."""
        own = self.slots.get(domain, {})
        if not own:
            return self.total
        others = dict(self.total)
        for node, use in own.items():
            others[node] = others[node].minus(use)
        return others

    def own(self, domain: str) -> dict[str, NodeUse]:
        """Per node, what ``domain``'s record holds there."""
        return self.slots.get(domain, {})


def _demand(pods: Iterable[Pod]) -> dict[str, int]:
    """The largest request of ``pods``, resource by resource."""
    demand: dict[str, int] = {}
    for pod in pods:
        for name, amount in pod_requests_of(pod).items():
            demand[name] = max(demand.get(name, 0), amount)
    return demand


def usage_table(
    *,
    gpu_nodes: Iterable[str],
    placements: Mapping[str, Placement],
    pod: Callable[[str], Pod | None],
    bound: Callable[[str], Iterable[Pod]],
    holders: Mapping[str, Iterable[str]] | None = None,
) -> UsageTable:
    """The table for ``gpu_nodes``; ``placements`` by domain key, ``pod`` looks a pod up by
    ``namespace/name``, ``bound`` gives the pods bound to a node, ``holders`` per node who
    holds its allocated attachment devices (``attachments.claim_holders``)."""
    nodes = set(gpu_nodes)
    recorded: set[str] = set()
    slots: dict[str, dict[str, NodeUse]] = {}
    neighbours: list[Neighbour] = []
    for key, placement in sorted(placements.items()):
        spec = placement.spec
        namespace = placement.metadata.namespace
        named = {
            f"{namespace}/{p.name}": member.node
            for piece in spec.all_slices
            for member in piece.members
            for p in member.pods
        }
        channel_only = {
            f"{namespace}/{p.name}": member.node
            for piece in spec.all_slices
            for member in piece.members
            for p in member.channel_only_pods
        }
        recorded.update(named, channel_only)
        where = {**named, **channel_only}
        found = [p for name in named if (p := pod(name)) is not None]
        demand = _demand(found)
        per_node: dict[str, NodeUse] = {}
        for piece in spec.all_slices:
            for member in piece.members:
                count = member.gpus // spec.gpus_per_pod if spec.gpus_per_pod > 0 else 0
                if member.node in nodes and count > 0:
                    before = per_node.get(member.node, NO_USE)
                    per_node[member.node] = before.plus(demand, pods=count, attachments=count)
        for name, node in channel_only.items():
            if node in nodes:
                seated = pod(name)
                requests = pod_requests_of(seated) if seated is not None else {}
                per_node[node] = per_node.get(node, NO_USE).plus(requests, attachments=1)
                if seated is not None:
                    found.append(seated)
        slots[key] = per_node
        neighbours.extend(
            Neighbour(node=where[f"{p.metadata.namespace}/{p.metadata.name}"],
                      namespace=p.metadata.namespace, labels=p.metadata.labels)
            for p in found
            if not finished(p)
        )  # fmt: skip
    use: dict[str, NodeUse] = {}
    for node in sorted(nodes):
        for found_pod in bound(node):
            name = f"{found_pod.metadata.namespace}/{found_pod.metadata.name}"
            if finished(found_pod):
                continue
            if name not in recorded:
                use[node] = use.get(node, NO_USE).plus(pod_requests_of(found_pod))
                neighbours.append(
                    Neighbour(
                        node=node,
                        namespace=found_pod.metadata.namespace,
                        labels=found_pod.metadata.labels,
                    )
                )
    for node, held in sorted((holders or {}).items()):
        unrecorded = sum(1 for holder in held if holder not in recorded)
        if node in nodes and unrecorded:
            use[node] = use.get(node, NO_USE).plus({}, pods=0, attachments=unrecorded)
    total = dict(use)
    for per_node in slots.values():
        for node, slot_use in per_node.items():
            total[node] = total.get(node, NO_USE).add(slot_use)
    return UsageTable(bound=use, slots=slots, neighbours=tuple(neighbours), total=total)
