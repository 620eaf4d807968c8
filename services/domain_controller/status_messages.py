"""The wording of a domain's status messages: where it runs, what it lacks, what moved.

Pure functions of the domain's Placement and its layout (``members.py``), used by the
conditions of ``status.py``. Lists of names are cut short after a few (``listed``), so a
message stays readable for a domain of hundreds of nodes.
"""

from __future__ import annotations

from collections.abc import Sequence

from services.domain_controller.members import Layout
from shared.crds.placement import PlacementSpec

_LISTED = 5  # names listed in a message before "and N more"


def listed(names: Sequence[str]) -> str:
    """``a, b, c`` with at most a few names, then ``and N more``."""
    shown = ", ".join(names[:_LISTED])
    more = len(names) - _LISTED
    return f"{shown} and {more} more" if more > 0 else shown


def where(placed: Layout) -> str:
    """Where the domain runs, for messages: ``nodes of clique X, channel 7`` for one slice."""
    nodes = f"{len(placed.nodes)} nodes"
    pieces = placed.slices
    if len(placed.cliques) == 1:
        clique, channel = pieces[0].spec.clique, pieces[0].spec.channel
        spread = "" if len(pieces) == 1 else f" in {len(pieces)} slices"
        return f"{nodes}{spread} of clique {clique}, channel {channel}"
    cliques = [f"{c} channel {placed.slices_in(c)[0].spec.channel}" for c in placed.cliques]
    return f"{nodes} in {len(pieces)} slices across {len(placed.cliques)} cliques: " + listed(
        cliques
    )


def short_of_room(placement: PlacementSpec, placed: Layout) -> str:
    """Why the placement holds room for fewer pods than the gang: the slices short of it."""
    reserved = placement.reserved_pods
    if len(placed.slices) == 1:
        clique = placed.slices[0].spec.clique
        return (
            f"room reserved for {reserved} of {placement.size} pods; the rest wait for room "
            f"in clique {clique}"
        )
    short = [
        f"slice {piece.spec.index} in clique {piece.spec.clique} holds room for {piece.room} "
        f"of its {piece.spec.size} pods"
        for piece in placed.slices
        if piece.short
    ]
    uncovered = placement.size - sum(piece.spec.size for piece in placed.slices)
    if uncovered > 0:
        short.append(f"{uncovered} pods in no slice yet")
    return f"room reserved for {reserved} of {placement.size} pods: {listed(short)}"


def stuck(placement: PlacementSpec) -> str:
    """The slices the allocator found its clique cannot hold (``waitingSince``), if any."""
    return "; ".join(
        f"slice {piece.index} cannot be made whole in clique {piece.clique} since "
        f"{piece.waiting_since.isoformat()}"
        for piece in placement.all_slices
        if piece.waiting_since is not None
    )


def moves(placement: PlacementSpec) -> str:
    """The slices that failed over, and from where."""
    return "; ".join(
        f"slice {piece.index} failed over from clique {piece.moved_from}"
        + (f" at {piece.moved_at.isoformat()}" if piece.moved_at is not None else "")
        for piece in placement.all_slices
        if piece.moved_from
    )


def spread(placed: Layout) -> str:
    """For a domain of several slices: `` in 3 slices across 2 cliques``; else ""."""
    if len(placed.slices) < 2:
        return ""
    cliques = len(placed.cliques)
    across = "of one clique" if cliques == 1 else f"across {cliques} cliques"
    return f" in {len(placed.slices)} slices {across}"


def without_nvlink(placed: Layout) -> str:
    """The Placed message of a domain that runs without IMEX."""
    pods = sum(len(node.pods) for node in placed.nodes)
    return (
        "no node the domain's pods can use has multi-node NVLink: it runs without IMEX and "
        f"its pods get no IMEX channel; the scheduler placed {pods} pods on "
        f"{len(placed.nodes)} nodes"
    )
