"""Crafted clusters for placement tests: racks of trays, and domains placed by hand."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from services.clique_allocator.placement import (
    Clique,
    ClusterView,
    GangRequest,
    Node,
    NodeShare,
    Placed,
    Reservation,
    SliceTarget,
    place,
)


def rack(
    clique_id: str,
    *,
    nodes: int = 18,
    gpus: int = 4,
    unhealthy: Iterable[int] = (),
    cordoned: Iterable[int] = (),
) -> Clique:
    """A clique of ``nodes`` trays named ``<clique>-t<slot>``."""
    sick, closed = set(unhealthy), set(cordoned)
    return Clique(
        id=clique_id,
        nodes=tuple(
            Node(
                name=tray(clique_id, slot),
                slot=slot,
                gpus=gpus,
                healthy=slot not in sick,
                schedulable=slot not in closed,
            )
            for slot in range(nodes)
        ),
    )


def tray(clique_id: str, slot: int) -> str:
    return f"{clique_id}-t{slot:02d}"


def holding(
    domain: str,
    clique_id: str,
    *,
    pods_by_slot: Mapping[int, int],
    gpus_per_pod: int = 4,
    channel: int = 0,
    slice_index: int = 0,
) -> Reservation:
    """A reservation made by hand: ``pods_by_slot`` pods on the trays of those slots."""
    return Reservation(
        domain=domain,
        slice_index=slice_index,
        clique=clique_id,
        channel=channel,
        gpus_per_pod=gpus_per_pod,
        shares=tuple(
            NodeShare(node=tray(clique_id, slot), pods=pods)
            for slot, pods in sorted(pods_by_slot.items())
        ),
    )


def whole_nodes(
    domain: str, clique_id: str, slots: Iterable[int], *, channel: int = 0
) -> Reservation:
    """A domain holding every GPU of the given trays."""
    return holding(domain, clique_id, pods_by_slot=dict.fromkeys(slots, 1), channel=channel)


def placed(view: ClusterView, request: GangRequest) -> tuple[Placed, ClusterView]:
    """Place and advance the view; the test fails if the gang was not placed."""
    decision = place(view, request)
    assert isinstance(decision, Placed), decision
    return decision, view.with_domain(decision.domain, decision.reservations)


def pods_per_node(placement: Placed) -> dict[str, int]:
    counts: dict[str, int] = {}
    for node in placement.pod_nodes:
        counts[node] = counts.get(node, 0) + 1
    return counts


def free_gpus(view: ClusterView, clique_id: str) -> dict[str, int]:
    state = view.clique(clique_id)
    assert state is not None
    return {node.name: node.free for node in state.nodes}


def grow_to(
    domain: str, pods: int, *, gpus_per_pod: int, slice_index: int = 0, span: int | None = None
) -> GangRequest:
    """A request that one slice the domain holds hold ``pods`` pods."""
    return GangRequest(
        domain=domain,
        gpus_per_pod=gpus_per_pod,
        targets=(SliceTarget(slice_index=slice_index, pods=pods),),
        span=span,
    )
