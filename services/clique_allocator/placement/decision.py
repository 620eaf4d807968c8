"""What the engine answers: :class:`Placed`, or :class:`NotPlaced` with a reason.

Both are tagged msgspec Structs (``type`` is ``Placed`` or ``NotPlaced``), so a decision can be
recorded or logged as JSON and decoded back as ``Decision``.
"""

from __future__ import annotations

import enum

import msgspec

from services.clique_allocator.placement.model import Channel, NonNegative, Reservation


class Reason(enum.StrEnum):
    """Why a gang was not placed; CamelCase like a Kubernetes condition reason."""

    INVALID_REQUEST = "InvalidRequest"
    """The request can never be met as written (e.g. 3-GPU pods on 4-GPU nodes)."""
    LARGER_THAN_ANY_CLIQUE = "LargerThanAnyClique"
    """One slice (of a fixed size, or on a fixed number of nodes) needs more than any clique
    has even when empty."""
    LARGER_THAN_CLUSTER = "LargerThanCluster"
    """The gang needs more than all cliques together have even when empty; it waits for the
    cluster to grow."""
    INSUFFICIENT_CAPACITY = "InsufficientCapacity"
    """No clique (or, for a gang larger than a clique, no set of cliques) has room now; the
    gang waits for room."""
    CLIQUE_FULL = "CliqueFull"
    """A slice the domain holds must grow, and its clique has no room for the new pods."""
    CLIQUE_UNAVAILABLE = "CliqueUnavailable"
    """A slice's clique is no longer in the cluster (its nodes were relabelled or removed)."""
    NO_FREE_CHANNEL = "NoFreeChannel"
    """Every clique with room has all of its IMEX channels in use."""
    POD_CONSTRAINTS = "PodConstraints"
    """The GPUs are there, but the pods' own constraints (node selector, affinity, taints
    they do not tolerate, CPU, memory, storage or pod count, anti-affinity) rule out the
    nodes that have them; the message names the constraint and the nodes."""


class SlicePlacement(msgspec.Struct, frozen=True, kw_only=True):
    """Where one slice's new pods go.

    ``pod_nodes`` names a node per new pod, ordered by tray slot then node name; the allocator
    pins its waiting pods, taken in a stable order of its own (e.g. by name), to these nodes.
    """

    slice_index: NonNegative
    clique: str
    channel: Channel
    pod_nodes: tuple[str, ...]


class Placed(msgspec.Struct, frozen=True, kw_only=True, tag="Placed"):
    """The gang fits: new pods per slice, and every reservation the domain holds afterwards.

    ``slices`` lists only the slices that received pods (empty when the domain already holds
    what it asked for). ``reservations`` is the domain's complete, updated set, to be recorded.
    """

    domain: str
    slices: tuple[SlicePlacement, ...] = ()
    reservations: tuple[Reservation, ...] = ()

    @property
    def cliques(self) -> tuple[str, ...]:
        """The distinct cliques of the domain's reservations, in slice order."""
        return tuple(dict.fromkeys(reservation.clique for reservation in self.reservations))

    @property
    def pod_nodes(self) -> tuple[str, ...]:
        """Every new pod's node, slice after slice."""
        return tuple(node for placed in self.slices for node in placed.pod_nodes)


class NotPlaced(msgspec.Struct, frozen=True, kw_only=True, tag="NotPlaced"):
    """The gang cannot be placed now. ``reason`` is for machines, ``message`` for people."""

    domain: str
    reason: Reason
    message: str


Decision = Placed | NotPlaced
