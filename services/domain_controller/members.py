"""A placement as the status sees it: member nodes over all slices, and the slices (pure).

The allocator records a domain as slices, each inside one NVLink clique (``Placement``, read
through :attr:`PlacementSpec.all_slices`, so a record of the first release is one slice). The
status reports two views of it:

- **member nodes**, one per node however many slices use it (slices of one domain in one clique
  may share a node): its clique and IMEX slot, the slices it serves, the pods pinned to it (those
  that take GPUs, by rank, then those that ask only for the channel, by name), and what keeps it
  from being Ready (a node problem, pods that do not run on it). A node that holds only pods
  without GPUs is a member like any. Ordered by clique (in slice order), then slot, then name;
- **slices**, by index: the pods placed in each (with and without GPUs), how many of them run
  on their member node, and the pod slots it holds (``gpus / gpusPerPod`` summed over its
  members: pods that take GPUs only).

A node's readiness depends on that node and its own pods only, so a fault in one slice leaves
the other slices' nodes as they are.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from services.domain_controller.facts import DomainFacts, NodeFacts, PodFacts
from shared.crds.placement import PlacementSlice, PlacementSpec, SliceMember


class MemberNode(msgspec.Struct, frozen=True, kw_only=True):
    """One member node of the domain, merged over the slices that use it."""

    name: str
    clique: str
    slot: int
    slices: tuple[int, ...]
    gpus: int
    pods: tuple[str, ...]
    """Pods pinned to the node: by rank, then those without GPUs by name."""
    facts: NodeFacts | None
    """The node as the caches show it; None when it left the cluster."""
    problem: str
    """A Degraded reason (``NodeFault``, ``NodeMissing`` ...), or "" when healthy."""
    detail: str
    waiting_for: tuple[str, ...]
    """Pods pinned to the node that do not run on it (yet)."""

    @property
    def ready(self) -> bool:
        return not self.problem and not self.waiting_for

    @property
    def address(self) -> str:
        return self.facts.address if self.facts is not None else ""


class SliceView(msgspec.Struct, frozen=True, kw_only=True):
    """One slice and how far along its pods are."""

    spec: PlacementSlice
    pods: int
    """Pods placed in the slice, those without GPUs included."""
    running: int
    """Of those, pods that run on their member node."""
    room: int
    """Pod slots (for pods that take GPUs) the slice holds, pinned or still free."""
    nodes: tuple[str, ...]
    """Member nodes, in slot order."""

    @property
    def short(self) -> bool:
        """Holds room for fewer pods than the ranks it covers."""
        return self.room < self.spec.size


class Layout(msgspec.Struct, frozen=True, kw_only=True):
    slices: tuple[SliceView, ...]
    nodes: tuple[MemberNode, ...]
    cliques: tuple[str, ...]
    """The distinct cliques of the slices, in slice order."""

    def slices_in(self, clique: str) -> tuple[SliceView, ...]:
        return tuple(piece for piece in self.slices if piece.spec.clique == clique)

    def nodes_in(self, clique: str) -> tuple[MemberNode, ...]:
        return tuple(node for node in self.nodes if node.clique == clique)


def node_problem(
    name: str, node: NodeFacts | None, *, clique: str = "", imex: bool = True
) -> tuple[str, str]:
    """The Degraded reason a member node gives, with a message naming it; ("", "") if none.

    ``clique`` is the clique of the node's slice: a node whose clique label is gone or another
    (its fabric lost) is out of it, though it may still look Ready. ``imex`` False: the domain
    runs without IMEX, so the node's IMEX state does not count.
    """
    if node is None:
        return "NodeMissing", f"node {name} is gone"
    if node.faults:
        return "NodeFault", f"node {name} has fault taint {', '.join(node.faults)}"
    if clique and node.clique is not None and node.clique != clique:
        now = node.clique or "no clique label"
        return "NodeOutOfClique", f"node {name} is out of clique {clique} ({now})"
    if node.kubelet_ready not in ("", "True"):
        return "NodeNotReady", f"node {name} is not Ready ({node.kubelet_ready})"
    if imex and node.imex != "True":
        state = node.imex_reason or ("not reported" if not node.imex else node.imex)
        return "ImexNotReady", f"node {name}: IMEX not ready ({state})"
    return "", ""


def runs_on(pod: PodFacts | None, node: str) -> bool:
    return pod is not None and pod.running and pod.node == node


def _slice_view(
    piece: PlacementSlice, pods: Mapping[str, PodFacts], *, gpus_per_pod: int
) -> SliceView:
    members = sorted(piece.members, key=lambda m: (m.slot, m.node))
    return SliceView(
        spec=piece,
        pods=piece.placed_pods + piece.placed_channel_only,
        running=sum(1 for m in members for name in _pinned(m) if runs_on(pods.get(name), m.node)),
        room=piece.slots(gpus_per_pod),
        nodes=tuple(m.node for m in members),
    )


def _pinned(member: SliceMember) -> tuple[str, ...]:
    """The member's pods: by rank, then those without GPUs by name."""
    ranked = sorted(member.pods, key=lambda p: p.rank)
    return (*(p.name for p in ranked), *sorted(p.name for p in member.channel_only_pods))


def _member_node(
    name: str,
    uses: list[tuple[PlacementSlice, SliceMember]],
    pods: Mapping[str, PodFacts],
    node: NodeFacts | None,
) -> MemberNode:
    first_slice, first_member = uses[0]
    ranked = sorted((placed for _, member in uses for placed in member.pods), key=lambda p: p.rank)
    pinned = (
        *(p.name for p in ranked),
        *sorted(p.name for _, member in uses for p in member.channel_only_pods),
    )
    problem, detail = node_problem(name, node, clique=first_slice.clique)
    return MemberNode(
        name=name,
        clique=first_slice.clique,
        slot=first_member.slot,
        slices=tuple(piece.index for piece, _ in uses),
        gpus=sum(member.gpus for _, member in uses),
        pods=pinned,
        facts=node,
        problem=problem,
        detail=detail,
        waiting_for=tuple(p for p in pinned if not runs_on(pods.get(p), name)),
    )


def layout(placement: PlacementSpec, facts: DomainFacts) -> Layout:
    """The placement's member nodes and slices, with the pods and nodes of ``facts``."""
    pods = {pod.name: pod for pod in facts.pods}
    pieces = sorted(placement.all_slices, key=lambda p: p.index)
    cliques = tuple(dict.fromkeys(piece.clique for piece in pieces))
    uses: dict[str, list[tuple[PlacementSlice, SliceMember]]] = {}
    for piece in pieces:
        for member in sorted(piece.members, key=lambda m: (m.slot, m.node)):
            uses.setdefault(member.node, []).append((piece, member))
    nodes = [_member_node(name, used, pods, facts.nodes.get(name)) for name, used in uses.items()]
    return Layout(
        slices=tuple(
            _slice_view(piece, pods, gpus_per_pod=placement.gpus_per_pod) for piece in pieces
        ),
        nodes=tuple(sorted(nodes, key=lambda n: (cliques.index(n.clique), n.slot, n.name))),
        cliques=cliques,
    )


NO_CLIQUE_SLOT = -1
"""The index NVIDIA's status gives a node without multi-node NVLink (its cliqueID is "")."""


def layout_without_nvlink(facts: DomainFacts, *, gpus_per_pod: int) -> Layout:
    """A domain that runs without IMEX: its member nodes are where the scheduler put its pods
    (clique "", slot -1); there are no slices."""
    on_node: dict[str, list[PodFacts]] = {}
    for pod in facts.pods:
        if pod.node and not pod.finished:
            on_node.setdefault(pod.node, []).append(pod)
    nodes = []
    for name in sorted(on_node):
        node = facts.nodes.get(name)
        problem, detail = node_problem(name, node, imex=False)
        pods = on_node[name]
        nodes.append(
            MemberNode(
                name=name,
                clique="",
                slot=NO_CLIQUE_SLOT,
                slices=(),
                gpus=gpus_per_pod * len(pods),
                pods=tuple(pod.name for pod in pods),
                facts=node,
                problem=problem,
                detail=detail,
                waiting_for=tuple(pod.name for pod in pods if not runs_on(pod, name)),
            )
        )
    return Layout(slices=(), nodes=tuple(nodes), cliques=())
