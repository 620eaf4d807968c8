"""The per-node and per-clique entries of a domain's status and of its membership event.

Pure functions of the domain's layout (``members.py``): ``status.nodes`` has one entry per
member node (once, however many slices use it), ``status.cliques`` one per clique the slices
use; the membership event lists the same members and the slices.
"""

from __future__ import annotations

from services.domain_controller.members import Layout, MemberNode, SliceView
from shared.crds.computedomain import ComputeDomainClique, ComputeDomainNode
from shared.events import DomainMember, DomainSlice


def node_entries(placed: Layout) -> tuple[ComputeDomainNode, ...]:
    return tuple(
        ComputeDomainNode(
            name=m.name,
            ip_address=m.address,
            clique_id=m.clique,
            index=m.slot,
            status="Ready" if m.ready else "NotReady",
        )
        for m in placed.nodes
    )


def clique_entries(placed: Layout) -> tuple[ComputeDomainClique, ...]:
    entries = []
    for clique in placed.cliques:
        pieces = placed.slices_in(clique)
        nodes = placed.nodes_in(clique)
        entries.append(
            ComputeDomainClique(
                clique=clique,
                channel=pieces[0].spec.channel,
                slices=tuple(piece.spec.index for piece in pieces),
                nodes=len(nodes),
                ready_nodes=sum(1 for node in nodes if node.ready),
                pods=sum(piece.pods for piece in pieces),
                running_pods=sum(piece.running for piece in pieces),
            )
        )
    return tuple(entries)


def event_member(m: MemberNode) -> DomainMember:
    return DomainMember(
        node=m.name,
        index=m.slot,
        address=m.address,
        pods=len(m.pods),
        gpus=m.gpus,
        status="Ready" if m.ready else "NotReady",
        clique=m.clique,
    )


def event_slice(piece: SliceView) -> DomainSlice:
    return DomainSlice(
        index=piece.spec.index,
        clique=piece.spec.clique,
        channel=piece.spec.channel,
        unit=piece.spec.unit,
        first_rank=piece.spec.first_rank,
        size=piece.spec.size,
        pods=piece.pods,
        running=piece.running,
        nodes=piece.nodes,
    )
