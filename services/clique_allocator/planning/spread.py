"""``spec.gang.nodes``: how many distinct nodes each slice spans (pure).

The nodes are shared evenly among the slices, which then never share a node. With a fixed
slice size the number of slices is known (the gang's size over the slice size, rounded up), so
the nodes must divide evenly among them. Without one, a gang that fits one clique has one slice
and spans all the nodes; for a larger gang the number of slices depends on the room in each
clique, so ``nodes`` needs a slice size there.
"""

from __future__ import annotations

from shared.crds.computedomain import ComputeDomain


def span_per_slice(
    domain: ComputeDomain, *, gang_pods: int, slice_size: int | None, fits_one: bool
) -> int | str | None:
    """Nodes per slice, None without ``spec.gang.nodes``, or why the request cannot be met."""
    nodes = domain.spec.gang.nodes if domain.spec.gang is not None else None
    if nodes is None or gang_pods == 0:
        return None
    if slice_size is None:
        if fits_one:
            return nodes
        return (
            "spec.gang.nodes needs spec.gang.sliceSize when the gang is larger than one "
            "clique: the number of slices must be known to share the nodes among them"
        )
    slices = -(-gang_pods // slice_size)
    if nodes % slices:
        return f"spec.gang.nodes ({nodes}) must divide evenly among the gang's {slices} slices"
    return nodes // slices
