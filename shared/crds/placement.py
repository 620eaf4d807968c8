"""Placement (``placements.cdo.dev/v1alpha1``): where the allocator put a domain's gang.

Written only by the clique allocator, in the domain's namespace under the domain's name, with an
owner reference to the domain. It is the allocator's memory (which cliques, which nodes, which
channel in each clique, which rank each pod has) and what the domain controller and the IMEX
agents read. The allocator deletes it when it has released the domain's nodes and channels; the
domain controller waits for that before it lets a deleted domain go.

The gang is cut into **slices**, each inside one NVLink clique. Slice ``i`` covers the gang's
ranks ``firstRank .. firstRank + size - 1``; slices follow each other without gaps from rank 0.
Every member pod carries its rank in the gang; its rank inside its slice is ``rank -
firstRank``. A domain that fits one clique has one slice.

The first release wrote one clique per Placement (``spec.clique``, ``spec.channel``,
``spec.members`` whose ``pods`` are plain names). Those fields stay in the schema so that such
objects remain valid after an upgrade; :attr:`PlacementSpec.all_slices` reads them as one slice
(ranks in slot order, then by pod name), and the allocator writes the slice shape the next time
it changes the record. Nothing writes the old fields any more.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, NamedTuple

from msgspec import Meta

from shared.crds.computedomain import CrdStruct
from shared.crds.names import MAX_CHANNELS
from shared.kube.meta import KubeObject


class PlacedPod(CrdStruct, frozen=True, kw_only=True):
    """A pod pinned to a member node, and its rank in the gang."""

    name: Annotated[str, Meta(description="Pod name.", min_length=1)]
    rank: Annotated[
        int,
        Meta(
            description="The pod's rank in the gang; its rank in the slice is rank - firstRank.",
            ge=0,
        ),
    ]
    uid: Annotated[
        str,
        Meta(
            description="The pod's metadata.uid: a pod recreated under the same name (a "
            "StatefulSet's) is another pod."
        ),
    ] = ""


class PodRef(CrdStruct, frozen=True, kw_only=True):
    """One pod, by name and uid (a pod recreated under the same name is another pod)."""

    name: Annotated[str, Meta(description="Pod name.", min_length=1)]
    uid: Annotated[str, Meta(description="The pod's metadata.uid.", min_length=1)]


class SliceMember(CrdStruct, frozen=True, kw_only=True):
    """One node of a slice: the GPUs the domain holds there and the pods pinned to it (those
    that take GPUs, with their ranks, and those that take only the channel)."""

    node: Annotated[str, Meta(description="Node name.", min_length=1)]
    slot: Annotated[int, Meta(description="The node's IMEX slot (tray index) in the clique.", ge=0)]
    gpus: Annotated[
        int,
        Meta(description="GPUs the slice holds on the node: gpusPerPod per pod slot.", ge=0),
    ] = 0
    pods: Annotated[
        tuple[PlacedPod, ...],
        Meta(
            description="The slice's pods pinned to the node, by rank.",
            extra_json_schema={
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
            },
        ),
    ] = ()
    channel_only_pods: Annotated[
        tuple[PodRef, ...],
        Meta(
            description="Pods of the domain pinned to the node that ask for no GPU, only the "
            "domain's channel: they hold no rank and no GPU, each takes an attachment device "
            "of the node.",
            extra_json_schema={
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
            },
        ),
    ] = ()


class PlacementSlice(CrdStruct, frozen=True, kw_only=True):
    """Consecutive ranks of the gang inside one clique, on one IMEX channel of that clique."""

    index: Annotated[int, Meta(description="Slice number, from 0.", ge=0)]
    clique: Annotated[
        str,
        Meta(description='The NVLink clique, "<cluster UUID>.<clique id>".', min_length=1),
    ]
    channel: Annotated[
        int,
        Meta(
            description="The domain's IMEX channel in the clique (every slice of the domain "
            "in one clique has the same).",
            ge=0,
            le=MAX_CHANNELS - 1,
        ),
    ]
    unit: Annotated[
        str,
        Meta(
            description="The gang unit the slice belongs to (a LeaderWorkerSet group, named "
            "by its leader pod; or a value of spec.gang.unitLabel); empty when the domain is "
            "one gang. Ranks count within the unit, and each unit has its own channel per "
            "clique."
        ),
    ] = ""
    first_rank: Annotated[int, Meta(description="The slice's lowest rank in the gang.", ge=0)] = 0
    size: Annotated[int, Meta(description="Ranks the slice covers.", ge=0)] = 0
    waiting_since: (
        Annotated[
            datetime,
            Meta(
                description="Since when the slice cannot be made whole in its clique (its "
                "clique gone, or too few healthy nodes there); the failover grace counts "
                "from here."
            ),
        ]
        | None
    ) = None
    moved_from: Annotated[
        str, Meta(description="The clique the slice last failed over from, if any.")
    ] = ""
    moved_at: Annotated[datetime, Meta(description="When the slice last failed over.")] | None = (
        None
    )
    members: Annotated[
        tuple[SliceMember, ...],
        Meta(
            description="Nodes of the slice, in slot order.",
            extra_json_schema={
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["node"],
            },
        ),
    ] = ()

    @property
    def placed_pods(self) -> int:
        """Pods that take GPUs pinned in the slice."""
        return sum(len(member.pods) for member in self.members)

    @property
    def placed_channel_only(self) -> int:
        """Pods that ask for no GPU pinned in the slice."""
        return sum(len(member.channel_only_pods) for member in self.members)

    def slots(self, gpus_per_pod: int) -> int:
        """Pod slots the slice holds (pinned or still free); none without GPUs per pod."""
        if gpus_per_pod < 1:
            return 0
        return sum(member.gpus for member in self.members) // gpus_per_pod

    def rank_in_slice(self, rank: int) -> int:
        return rank - self.first_rank


class LegacyMember(CrdStruct, frozen=True, kw_only=True):
    """A member node as the first release recorded it (read only)."""

    node: Annotated[str, Meta(description="Node name.", min_length=1)]
    slot: Annotated[int, Meta(description="The node's IMEX slot.", ge=0)]
    gpus: Annotated[int, Meta(description="GPUs the domain holds on the node.", ge=0)] = 0
    pods: Annotated[
        tuple[str, ...],
        Meta(
            description="Names of the pods pinned to the node.",
            extra_json_schema={"x-kubernetes-list-type": "set"},
        ),
    ] = ()


_LEGACY = "Deprecated: the one-clique shape of the first release, read but no longer written; "


class PlacementSpec(CrdStruct, frozen=True, kw_only=True):
    """The allocator's decision for one domain."""

    gpus_per_pod: Annotated[
        int,
        Meta(
            description="GPUs each pod of the gang takes; 0 while no pod of the domain takes "
            "GPUs (a domain of pods that ask only for the channel).",
            ge=0,
        ),
    ]
    size: Annotated[
        int, Meta(description="Pods that take GPUs in the gang: the ranks its slices cover.", ge=0)
    ]
    channel_only: Annotated[
        int,
        Meta(
            description="Pods of the domain that ask for no GPU, only the channel, placed or "
            "waiting (each is seated in a slice's members[].channelOnlyPods).",
            ge=0,
        ),
    ] = 0
    slice_size: (
        Annotated[
            int,
            Meta(
                description="The fixed slice size the domain was placed with "
                "(spec.gang.sliceSize); absent when the allocator chose the slices.",
                ge=1,
            ),
        ]
        | None
    ) = None
    slices: Annotated[
        tuple[PlacementSlice, ...],
        Meta(
            description="The gang's slices, by index.",
            extra_json_schema={
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["index"],
            },
        ),
    ] = ()
    multi_node_nvlink: Annotated[
        bool,
        Meta(
            description="False: no node the domain's pods can use has multi-node NVLink, so "
            "the domain runs without IMEX: no slices and no channel; the scheduler places its "
            "pods (what NVIDIA's driver does on such nodes)."
        ),
    ] = True
    evicting: Annotated[
        tuple[PodRef, ...],
        Meta(
            description="Pods of slices that failed over, which the allocator evicts until "
            "they are gone.",
            extra_json_schema={
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["uid"],
            },
        ),
    ] = ()
    clique: Annotated[str, Meta(description=_LEGACY + "the clique (see slices).")] = ""
    channel: (
        Annotated[int, Meta(description=_LEGACY + "the channel.", ge=0, le=MAX_CHANNELS - 1)] | None
    ) = None
    members: Annotated[
        tuple[LegacyMember, ...],
        Meta(
            description=_LEGACY + "the member nodes.",
            extra_json_schema={
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["node"],
            },
        ),
    ] = ()

    @property
    def all_slices(self) -> tuple[PlacementSlice, ...]:
        """The slices, with a record of the first release read as its one slice."""
        if self.slices or not self.clique or self.channel is None:
            return self.slices
        return (legacy_slice(self.clique, self.channel, self.members, size=self.size),)

    @property
    def placed_pods(self) -> int:
        """Pods that take GPUs seated in any slice."""
        return sum(piece.placed_pods for piece in self.all_slices)

    @property
    def placed_channel_only(self) -> int:
        """Pods that ask for no GPU seated in any slice."""
        return sum(piece.placed_channel_only for piece in self.all_slices)

    @property
    def reserved_pods(self) -> int:
        """Pods the placement holds GPUs for, whether or not they exist yet."""
        return sum(piece.slots(self.gpus_per_pod) for piece in self.all_slices)

    @property
    def cliques(self) -> tuple[str, ...]:
        """The distinct cliques of the slices, in slice order."""
        return tuple(dict.fromkeys(piece.clique for piece in self.all_slices))

    @property
    def pod_names(self) -> frozenset[str]:
        """Every pod seated in any slice, those without GPUs included."""
        seated = (
            (*(pod.name for pod in member.pods), *(ref.name for ref in member.channel_only_pods))
            for piece in self.all_slices
            for member in piece.members
        )
        return frozenset(name for names in seated for name in names)

    @property
    def nodes(self) -> tuple[str, ...]:
        """Every member node once, in slice order."""
        return tuple(
            dict.fromkeys(member.node for piece in self.all_slices for member in piece.members)
        )

    def seats_of(self, pod: str) -> tuple[Seat, ...]:
        """Every place the record seats a pod named ``pod`` (one, or none): with a rank, or
        among the pods that ask for no GPU. The IMEX agent and the allocator's channel
        allocation webhook both ask it whether a pod is a member pinned to a node."""
        found: list[Seat] = []
        for piece in self.all_slices:
            for member in piece.members:
                seated: tuple[PlacedPod | PodRef, ...] = (*member.pods, *member.channel_only_pods)
                found.extend(
                    Seat(piece=piece, node=member.node, pod=placed)
                    for placed in seated
                    if placed.name == pod
                )
        return tuple(found)


class Seat(NamedTuple):
    """Where a Placement seats a pod: its slice, its node, and its entry (with its rank, or
    without one for a pod that asks for no GPU)."""

    piece: PlacementSlice
    node: str
    pod: PlacedPod | PodRef


def legacy_slice(
    clique: str, channel: int, members: tuple[LegacyMember, ...], *, size: int
) -> PlacementSlice:
    """A first-release record as one slice: ranks go to its pods in slot order, then name."""
    converted: list[SliceMember] = []
    rank = 0
    for member in sorted(members, key=lambda m: (m.slot, m.node)):
        pods = []
        for name in sorted(member.pods):
            pods.append(PlacedPod(name=name, rank=rank))
            rank += 1
        converted.append(
            SliceMember(node=member.node, slot=member.slot, gpus=member.gpus, pods=tuple(pods))
        )
    return PlacementSlice(
        index=0,
        clique=clique,
        channel=channel,
        first_rank=0,
        size=max(size, rank),
        members=tuple(converted),
    )


class Placement(KubeObject, frozen=True, kw_only=True):
    spec: PlacementSpec
