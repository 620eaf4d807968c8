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


class SliceTarget(msgspec.Struct, frozen=True, kw_only=True):
    """Pods one slice the domain already holds must hold: more than now grows it, in its clique."""

    slice_index: NonNegative
    pods: NonNegative


class NodeLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Where the gang's pods can be scheduled beyond GPUs, from their own specs (node
    selector, affinity, tolerations, CPU/memory/storage/pod count, anti-affinity).

    The engine places the gang as if ``excluded`` nodes were not in their cliques, and as if a
    node of ``most_pods`` had room for no more of the domain's pods than that; ``preferred``
    orders nodes that tie otherwise (higher first). ``why`` says in one phrase which nodes the
    constraints rule out, for the message of a gang that waits because of them.
    """

    excluded: frozenset[str] = frozenset()
    """Nodes where no pod of the gang can be scheduled."""
    most_pods: dict[str, int] = msgspec.field(default_factory=dict)
    """Per node, the most pods of the domain it can hold in all (its pods there now
    included); a node not listed is limited by its GPUs only."""
    preferred: dict[str, int] = msgspec.field(default_factory=dict)
    """Per node, the weight of the pods' preferred node affinity terms it matches."""
    why: str = ""
    cliques: frozenset[str] | None = None
    """The cliques of the nodes the limits name, when the caller knows them (else the engine
    looks them up)."""

    @property
    def nodes(self) -> frozenset[str]:
        """Every node the limits say something about."""
        return self.excluded | self.most_pods.keys() | self.preferred.keys()


class GangRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What a domain wants beyond what it holds; the engine places it all or nothing.

    - ``targets``: for slices the domain holds, the pods each must hold (a slice not listed
      keeps what it has). A slice grows in its own clique or not at all.
    - ``new_pods``: pods of ranks beyond every slice the domain holds, for new slices.
    - ``slice_pods``: the size of new slices (the last one smaller when ``new_pods`` is not a
      multiple). None: new pods that fit the largest clique go to one slice (waiting for room
      there if none has it now), and more are cut into the fewest slices that fit now.
    - ``extend_last``: before any new slice opens, the domain's last slice takes as many of the
      new pods as its clique has room for (automatic slicing of a gang larger than a clique).
    - ``span``: every slice spreads over exactly this many distinct nodes, and slices never
      share a node (the ComputeDomain's ``spec.gang.nodes``, shared evenly among slices).
    - ``moves``: slices the domain holds that fail over: each one's reservation is dropped and
      a slice of the same index and ``pods`` pods is placed in another clique (failover).
    - ``limits``: the nodes the pods' own constraints rule out or cap (:class:`NodeLimits`);
      None when they rule out nothing.
    """

    domain: str
    gpus_per_pod: Positive
    targets: tuple[SliceTarget, ...] = ()
    new_pods: NonNegative = 0
    slice_pods: Positive | None = None
    extend_last: bool = False
    span: Positive | None = None
    moves: tuple[SliceTarget, ...] = ()
    limits: NodeLimits | None = None
