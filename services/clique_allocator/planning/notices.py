"""The Kubernetes Events a plan records on its domain: reserved, grown, shrunk, deleted."""

from __future__ import annotations

from typing import Literal

import msgspec

from shared.crds.placement import PlacementSlice, PlacementSpec

NoticeType = Literal["Normal", "Warning"]


class Notice(msgspec.Struct, frozen=True, kw_only=True):
    """A Kubernetes Event to record on the ComputeDomain."""

    type: NoticeType
    reason: str
    message: str


def pods_of(count: int, gpus: int) -> str:
    return f"{count} pod{'' if count == 1 else 's'} of {gpus} GPU{'' if gpus == 1 else 's'}"


def where(spec: PlacementSpec) -> str:
    """Where the record's slots are: nodes, cliques and channels, slice by slice."""
    pieces = spec.all_slices
    if len(pieces) == 1:
        return _where_one(pieces[0])
    parts = [
        f"slice {piece.index}: {piece.slots(spec.gpus_per_pod)} on {_where_one(piece)}"
        for piece in pieces
    ]
    return f"{len(pieces)} slices ({'; '.join(parts)})"


def _where_one(piece: PlacementSlice) -> str:
    nodes = len(piece.members)
    return (
        f"{nodes} node{'' if nodes == 1 else 's'} of clique {piece.clique}, channel {piece.channel}"
    )


def change_notices(before: PlacementSpec | None, after: PlacementSpec) -> list[Notice]:
    slots = after.reserved_pods
    if before is None:
        message = f"reserved {pods_of(slots, after.gpus_per_pod)} on {where(after)}"
        return [Notice(type="Normal", reason="Reserved", message=message)]
    old = before.reserved_pods
    if slots > old:
        message = (
            f"reserved {pods_of(slots - old, after.gpus_per_pod)} more; {slots} slots on "
            f"{where(after)}"
        )
        return [Notice(type="Normal", reason="Grown", message=message)]
    if slots < old:
        freed = old - slots
        message = (
            f"released {freed} pod slot{'' if freed == 1 else 's'}; {slots} left on {where(after)}"
        )
        return [Notice(type="Normal", reason="Shrunk", message=message)]
    return []


def deleted(placement: PlacementSpec) -> str:
    cliques = ", ".join(
        f"channel {piece.channel} of clique {piece.clique}" for piece in placement.all_slices
    )
    return (
        f"no pod uses the domain's claims any more: released {placement.reserved_pods} pod "
        f"slots and {cliques or 'no channel'}"
    )
