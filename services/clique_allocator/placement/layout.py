"""A gang request checked and cut into slices: pods per slice and nodes per slice."""

from __future__ import annotations

import msgspec

from services.clique_allocator.placement.messages import gpus as gpus_text
from services.clique_allocator.placement.model import GangRequest, Reservation


class SliceLayout(msgspec.Struct, frozen=True, kw_only=True):
    """How a valid request divides: ``slices`` slices of ``pods`` pods, each on ``span`` nodes."""

    slices: int
    pods: int
    span: int | None


def plan_layout(
    request: GangRequest, *, node_sizes: tuple[int, ...], held: tuple[Reservation, ...]
) -> SliceLayout | str:
    """The request's slice layout, or why it can never be met as written."""
    gpus = request.gpus_per_pod
    if gpus < 1:
        return f"gpus_per_pod must be at least 1, not {gpus}"
    if request.pods < 0:
        return f"pods must not be negative, not {request.pods}"
    fitting = [size for size in node_sizes if size % gpus == 0]
    if node_sizes and not fitting:
        sizes = " or ".join(str(size) for size in node_sizes)
        return f"pods of {gpus_text(gpus)} fit no node: every node has {sizes} GPUs"
    for reservation in held:
        if reservation.gpus_per_pod != gpus:
            return (
                f"domain {request.domain} holds pods of {gpus_text(reservation.gpus_per_pod)}; "
                f"it cannot add pods of {gpus_text(gpus)}"
            )
    per_slice = request.pods if request.slice_pods is None else request.slice_pods
    if request.slice_pods is not None and request.slice_pods < 1:
        return f"slice_pods must be at least 1, not {request.slice_pods}"
    if request.pods == 0:
        return SliceLayout(slices=0, pods=0, span=None)
    if request.pods % per_slice:
        return f"pods ({request.pods}) must be a multiple of slice_pods ({per_slice})"
    slices = request.pods // per_slice
    if request.num_nodes is None:
        return SliceLayout(slices=slices, pods=per_slice, span=None)
    if request.num_nodes < 1:
        return f"num_nodes must be at least 1, not {request.num_nodes}"
    if request.num_nodes % slices:
        return f"num_nodes ({request.num_nodes}) must divide evenly among {slices} slices"
    span = request.num_nodes // slices
    if span > per_slice:
        return f"{per_slice} pods cannot span {span} nodes: every node needs a pod"
    most = max((size // gpus for size in fitting), default=0)
    if fitting and span * most < per_slice:
        return (
            f"{per_slice} pods of {gpus_text(gpus)} do not fit on {span} nodes "
            f"of {max(fitting)} GPUs"
        )
    return SliceLayout(slices=slices, pods=per_slice, span=span)
