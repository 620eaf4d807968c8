"""The human half of :class:`NotPlaced`: one sentence that says what is missing and where."""

from __future__ import annotations


def gpus(count: int) -> str:
    return f"{count} GPU" if count == 1 else f"{count} GPUs"


def pods_of(pods: int, gpus_per_pod: int) -> str:
    return f"{pods} pod{plural(pods)} of {gpus(gpus_per_pod)}"


def no_room(
    *, pods: int, gpus_per_pod: int, whole_nodes: bool, best: tuple[int, str] | None
) -> str:
    """No clique has room now; ``best`` is (room, clique) of the clique with the most."""
    if whole_nodes:
        wanted = f"no clique has {pods} nodes with {gpus_per_pod} free GPU{plural(gpus_per_pod)}"
    else:
        wanted = f"no clique has room for {pods_of(pods, gpus_per_pod)}"
    if best is None:
        return f"{wanted}: the cluster has no usable GPU nodes"
    room, clique = best
    return f"{wanted}: best clique {clique} has {room}"


def no_room_on_span(
    *, pods: int, gpus_per_pod: int, span: int, best: tuple[int, int, str] | None
) -> str:
    """No clique can carry the pods on exactly ``span`` nodes; best is (nodes, pods, clique)."""
    wanted = f"no clique can place {pods_of(pods, gpus_per_pod)} on exactly {span} nodes"
    if best is None:
        return f"{wanted}: the cluster has no usable GPU nodes"
    nodes, room, clique = best
    return f"{wanted}: best clique {clique} has {nodes} nodes with room, for {room} pods"


def larger_than_any(
    *, pods: int, gpus_per_pod: int, span: int | None, largest: tuple[int, int, str]
) -> str:
    room, nodes, clique = largest
    need = pods_of(pods, gpus_per_pod) + (f" on {span} nodes" if span else "")
    advice = "spread them over fewer nodes" if span else "use a smaller slice size"
    return (
        f"{need} exceed every clique even when empty: the largest, {clique}, takes {room} "
        f"such pods on {nodes} nodes; {advice}"
    )


def larger_than_cluster(*, pods: int, gpus_per_pod: int, room: int, cliques: int) -> str:
    return (
        f"{pods_of(pods, gpus_per_pod)} exceed the whole cluster even when empty: its "
        f"{cliques} clique{plural(cliques)} take {room} such pods in all"
    )


def no_room_together(*, pods: int, gpus_per_pod: int, room: int, cliques: int) -> str:
    return (
        f"the cliques together have room for {room} of {pods_of(pods, gpus_per_pod)} now "
        f"({cliques} clique{plural(cliques)} with room)"
    )


def clique_full(*, clique: str, pods: int, gpus_per_pod: int, room: int) -> str:
    return (
        f"the slice stays in clique {clique}, which has room for {room} of "
        f"{pods_of(pods, gpus_per_pod)} more"
    )


def constrained(*, why: str, message: str) -> str:
    """A gang the pods' constraints keep out: which nodes they rule out, then what is left."""
    return f"{why}; on the nodes left, {message}"


def also_constrained(*, why: str, message: str) -> str:
    """A gang that waits for GPUs, whose pods' constraints rule out nodes as well."""
    return f"{message} (besides, {why})"


def in_slice(message: str, *, slice_index: int, slices: int) -> str:
    return f"slice {slice_index + 1} of {slices}: {message}" if slices > 1 else message


def plural(count: int) -> str:
    return "" if count == 1 else "s"
