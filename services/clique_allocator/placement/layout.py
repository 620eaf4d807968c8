"""Checking a gang request, and the sizes of the new slices it asks for (pure)."""

from __future__ import annotations

from collections.abc import Sequence

from services.clique_allocator.placement.messages import gpus as gpus_text
from services.clique_allocator.placement.model import GangRequest, Reservation


def request_problem(
    request: GangRequest, *, node_sizes: tuple[int, ...], held: Sequence[Reservation]
) -> str | None:
    """Why the request can never be met as written, or None when it is well formed."""
    gpus = request.gpus_per_pod
    if gpus < 1:
        return f"gpus_per_pod must be at least 1, not {gpus}"
    if request.new_pods < 0:
        return f"new_pods must not be negative, not {request.new_pods}"
    fitting = [size for size in node_sizes if size % gpus == 0]
    if node_sizes and not fitting:
        listed = " or ".join(str(size) for size in node_sizes)
        return f"pods of {gpus_text(gpus)} fit no node: every node has {listed} GPUs"
    for reservation in held:
        if reservation.gpus_per_pod != gpus:
            return (
                f"domain {request.domain} holds pods of {gpus_text(reservation.gpus_per_pod)}; "
                f"it cannot add pods of {gpus_text(gpus)}"
            )
    indices = {reservation.slice_index for reservation in held}
    for target in request.targets:
        if target.slice_index not in indices:
            return f"domain {request.domain} holds no slice {target.slice_index}"
    if request.span is not None:
        most = max((size // gpus for size in fitting), default=0)
        sizes = [target.pods for target in request.targets if target.pods > 0]
        sizes += list(new_slice_sizes(request.new_pods, request.slice_pods))
        for pods in sizes:
            if request.span > pods:
                return f"{pods} pods cannot span {request.span} nodes: every node needs a pod"
            if fitting and request.span * most < pods:
                return (
                    f"{pods} pods of {gpus_text(gpus)} do not fit on {request.span} nodes "
                    f"of {max(fitting)} GPUs"
                )
    return None


def new_slice_sizes(pods: int, slice_pods: int | None) -> tuple[int, ...]:
    """Sizes of fixed-size new slices for ``pods`` pods, the last one smaller; one slice of all
    of them when there is no fixed size (the engine may still cut those)."""
    if pods <= 0:
        return ()
    if slice_pods is None:
        return (pods,)
    whole, rest = divmod(pods, slice_pods)
    return (slice_pods,) * whole + ((rest,) if rest else ())
