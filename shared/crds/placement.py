"""Placement (``placements.cdo.dev/v1alpha1``): where the allocator put a domain's gang.

Written only by the clique allocator, in the domain's namespace under the domain's name, with an
owner reference to the domain. It is the allocator's memory (which clique, which nodes, which
channel) and what the domain controller and the IMEX agents read. The allocator deletes it when
it has released the domain's nodes and channel; the domain controller waits for that before it
lets a deleted domain go.
"""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from shared.crds.computedomain import CrdStruct
from shared.crds.names import MAX_CHANNELS
from shared.kube.meta import KubeObject


class PlacementMember(CrdStruct, frozen=True, kw_only=True):
    """One node of the gang and the pods pinned to it."""

    node: Annotated[str, Meta(description="Node name.", min_length=1)]
    slot: Annotated[int, Meta(description="The node's IMEX slot (tray index) in the clique.", ge=0)]
    gpus: Annotated[int, Meta(description="GPUs the domain holds on the node.", ge=0)] = 0
    pods: Annotated[
        tuple[str, ...],
        Meta(
            description="Names of the domain's pods pinned to the node.",
            extra_json_schema={"x-kubernetes-list-type": "set"},
        ),
    ] = ()


class PlacementSpec(CrdStruct, frozen=True, kw_only=True):
    """The allocator's decision for one domain."""

    clique: Annotated[
        str,
        Meta(description='The NVLink clique, "<cluster UUID>.<clique id>".', min_length=1),
    ]
    channel: Annotated[
        int,
        Meta(description="The domain's IMEX channel in the clique.", ge=0, le=MAX_CHANNELS - 1),
    ]
    gpus_per_pod: Annotated[int, Meta(description="GPUs each pod of the gang takes.", ge=1)]
    size: Annotated[int, Meta(description="Pods in the gang.", ge=0)]
    members: Annotated[
        tuple[PlacementMember, ...],
        Meta(
            description="Nodes of the gang, in slot order.",
            extra_json_schema={
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["node"],
            },
        ),
    ] = ()

    @property
    def placed_pods(self) -> int:
        return sum(len(member.pods) for member in self.members)


class Placement(KubeObject, frozen=True, kw_only=True):
    spec: PlacementSpec
