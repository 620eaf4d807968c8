"""Shrinking: the reservation left after some of a slice's pods went away."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from services.clique_allocator.placement.model import NodeShare, Reservation


def release(reservation: Reservation, *, pods_by_node: Mapping[str, int]) -> Reservation:
    """``reservation`` less ``pods_by_node`` pods on each named node.

    Shares that reach zero disappear; the reservation itself stays, with its clique and channel,
    even with no pods left, so the domain's next pods return to the same clique (drop it with
    ``ClusterView.with_domain`` when the domain is deleted). Releasing pods a node does not
    hold is a bookkeeping error in the caller and raises ValueError.
    """
    held = {share.node: share.pods for share in reservation.shares}
    for node, pods in sorted(pods_by_node.items()):
        if pods < 0 or pods > held.get(node, 0):
            raise ValueError(
                f"cannot release {pods} pods of {reservation.domain} on {node}: "
                f"it holds {held.get(node, 0)} there"
            )
    shares = tuple(
        NodeShare(node=share.node, pods=share.pods - pods_by_node.get(share.node, 0))
        for share in reservation.shares
        if share.pods > pods_by_node.get(share.node, 0)
    )
    return msgspec.structs.replace(reservation, shares=shares)
