"""What the engine decides from: the cliques and their nodes, reservations, and a gang request.

The allocator fills these from Kubernetes:

- a :class:`Clique` per distinct value of the node label ``nvidia.com/gpu.clique`` (the whole
  ``"<cluster uuid>.<clique id>"`` string), with a :class:`Node` per node carrying that label;
- a :class:`Reservation` per domain and slice, as recorded by the allocator when it placed them;
- a :class:`GangRequest` per ComputeDomain from its spec and its workload (replicas, GPUs per pod).

A node's free GPUs are not an input: the engine derives them from the node's size and the
reservations that hold shares of it, so the two can never disagree.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

MAX_CHANNELS = 2048
"""IMEX channels a node offers: ``/dev/nvidia-caps-imex-channels/channel0`` .. ``channel2047``."""

NonNegative = Annotated[int, Meta(ge=0)]
Positive = Annotated[int, Meta(ge=1)]
Channel = Annotated[int, Meta(ge=0, lt=MAX_CHANNELS)]


class Node(msgspec.Struct, frozen=True, kw_only=True):
    """One GPU node (a compute tray) of a clique."""

    name: Annotated[str, Meta(description="Kubernetes node name.", min_length=1)]
    slot: Annotated[
        NonNegative, Meta(description="Tray slot: the node's position in the IMEX node list.")
    ]
    gpus: Annotated[Positive, Meta(description="GPUs the node has, e.g. 4 on a GB200 tray.")]
    healthy: Annotated[bool, Meta(description="Ready, no cdo fault taint, fabric healthy.")] = True
    schedulable: Annotated[bool, Meta(description="Not cordoned.")] = True

    @property
    def usable(self) -> bool:
        """Whether new pods may go here. Pods already placed stay counted either way."""
        return self.healthy and self.schedulable


class Clique(msgspec.Struct, frozen=True, kw_only=True):
    """The nodes that share one NVLink partition, and so one IMEX domain."""

    id: Annotated[
        str, Meta(description='Label nvidia.com/gpu.clique: "<cluster uuid>.<clique id>".')
    ]
    nodes: tuple[Node, ...] = ()


class NodeShare(msgspec.Struct, frozen=True, kw_only=True):
    """Pods a reservation holds on one node."""

    node: Annotated[str, Meta(min_length=1)]
    pods: Positive


class Reservation(msgspec.Struct, frozen=True, kw_only=True):
    """What one slice of a domain holds in one clique: node shares and the domain's channel there.

    An unsliced domain has one reservation, ``slice_index`` 0. A reservation whose pods were all
    released keeps its clique and channel: the domain's next pods (a replacement after a node
    failure, a scale-up) go back to the same clique. It disappears only when the domain does.
    """

    domain: Annotated[str, Meta(description='Domain key, e.g. "<namespace>/<name>".')]
    slice_index: NonNegative = 0
    clique: str
    channel: Channel
    gpus_per_pod: Positive
    shares: tuple[NodeShare, ...] = ()

    @property
    def pods(self) -> int:
        return sum(share.pods for share in self.shares)

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod


class GangRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What a domain wants in total; the engine places the difference to what it already holds.

    ``pods`` is the gang's whole size (not an increment), so asking again with the same request
    is harmless. ``slice_pods`` splits a gang larger than a clique into slices of that many pods,
    each slice inside one clique. ``num_nodes`` (the ComputeDomain's ``spec.numNodes``) is the
    number of distinct nodes the domain must span; with slices it is shared evenly among them.
    """

    domain: str
    pods: NonNegative
    gpus_per_pod: Positive
    slice_pods: Positive | None = None
    num_nodes: Positive | None = None
