"""ComputeDomain (``resource.nvidia.com``): the object users write, in both versions served.

``v1beta2`` is NVIDIA's current API and the version stored (the conversion hub): its spec is
``spec.channel.resourceClaimTemplate.name`` and ``spec.channel.allocationMode``, and cdo adds
``spec.failover`` and ``spec.gang``. ``v1beta1`` is the same with NVIDIA's older
``spec.numNodes``, which v1beta2 keeps in the annotation
``resource.nvidia.com/computedomain-num-nodes`` (:mod:`shared.crds.conversion`). The status is
the same in both: NVIDIA's ``status.status`` and ``status.nodes[]`` for existing tooling, and
cdo's conditions, ``observedGeneration``, cliques and IMEX channels. These Structs are both what
services decode (v1beta2) and the source of the CRD's schemas (:mod:`shared.crds.openapi`);
docs/domain-controller.md explains every field.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from shared.crds.names import MAX_CHANNELS, MAX_NUM_NODES
from shared.crds.openapi import CRD_DEFAULT
from shared.kube.meta import KubeObject

DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
CONDITION_REASON = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"

DomainState = Literal["Ready", "NotReady"]
ConditionStatus = Literal["True", "False", "Unknown"]


def rule(text: str, message: str, *, field_path: str = "") -> dict[str, Any]:
    """One ``x-kubernetes-validations`` entry."""
    entry = {"rule": text, "message": message}
    if field_path:
        entry["fieldPath"] = field_path
    return entry


class CrdStruct(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Base of the Structs that make up a custom resource's spec and status."""


# -- spec --------------------------------------------------------------------------------------


class ResourceClaimTemplateReference(CrdStruct, frozen=True, kw_only=True):
    """The ResourceClaimTemplate the domain controller creates for the domain's workload."""

    name: Annotated[
        str,
        Meta(
            description="Name of the ResourceClaimTemplate, in the domain's namespace. The "
            "workload's pods reference it in spec.resourceClaims; immutable.",
            min_length=1,
            max_length=253,
            pattern=DNS_SUBDOMAIN,
            extra_json_schema={
                "x-kubernetes-validations": [
                    rule("self == oldSelf", "spec.channel.resourceClaimTemplate.name is immutable")
                ]
            },
        ),
    ]


class ComputeDomainChannel(CrdStruct, frozen=True, kw_only=True):
    """How the domain's pods get their IMEX channel."""

    resource_claim_template: ResourceClaimTemplateReference
    allocation_mode: Annotated[
        Literal["Single", "All"],
        Meta(
            description="Single: each pod gets the domain's own channel (isolated from other "
            "domains). All (in NVIDIA's driver, every channel of the node) is accepted so that "
            "NVIDIA's manifests apply, and treated as Single: each pod gets the domain's own "
            "channel only. Immutable.",
            extra={CRD_DEFAULT: True},
            extra_json_schema={
                "x-kubernetes-validations": [
                    rule("self == oldSelf", "spec.channel.allocationMode is immutable")
                ]
            },
        ),
    ] = "Single"


class GangSpec(CrdStruct, frozen=True, kw_only=True):
    """cdo addition: how the allocator cuts and spreads the gang, and its size if not the
    workload's."""

    size: (
        Annotated[
            int,
            Meta(
                description="Pods the allocator places together before any of them starts. "
                "Without it the allocator takes the workload's replicas or parallelism.",
                ge=1,
                le=100_000,
            ),
        ]
        | None
    ) = None
    slice_size: (
        Annotated[
            int,
            Meta(
                description="Cut the gang into slices of this many pods (consecutive ranks), "
                "each slice inside one NVLink clique; the last slice is smaller when the gang "
                "is not a multiple. Without it a gang that fits one clique stays in one, and a "
                "larger one is cut into the fewest slices that fit. Read when the domain is "
                "first placed.",
                ge=1,
                le=100_000,
            ),
        ]
        | None
    ) = None
    unit_label: (
        Annotated[
            str,
            Meta(
                description="Place the domain's pods as independent gang units, one per value of "
                "this pod label: each unit is placed all or nothing, in its own slices and with "
                "its own IMEX channel per clique, apart from the other units. spec.gang.size is "
                "then the size of each unit (required). Without it a LeaderWorkerSet's groups are "
                "the units, and every other workload is one gang.",
                min_length=1,
                max_length=317,
            ),
        ]
        | None
    ) = None
    nodes: (
        Annotated[
            int,
            Meta(
                description="Spread the gang over exactly this many distinct nodes (shared "
                "evenly among slices, which then never share a node). Without it pods pack "
                "onto as few nodes as they fit.",
                ge=1,
                le=100_000,
            ),
        ]
        | None
    ) = None


class FailoverSpec(CrdStruct, frozen=True, kw_only=True):
    """cdo addition: what happens to a slice whose clique can no longer hold it."""

    policy: Annotated[
        Literal["Move", "Wait"],
        Meta(
            description="Move: once the grace has passed, the slice's remaining pods are "
            "evicted and the slice is placed again, whole, in another clique with room. Wait: "
            "the slice waits for its own clique to recover.",
            extra={CRD_DEFAULT: True},
        ),
    ] = "Move"
    grace_seconds: Annotated[
        int,
        Meta(
            description="How long a slice may be unable to be made whole in its clique (its "
            "clique gone, or too few healthy nodes with room there) before it moves.",
            ge=0,
            le=86_400,
            extra={CRD_DEFAULT: True},
        ),
    ] = 300


class ComputeDomainSpec(CrdStruct, frozen=True, kw_only=True):
    """What the user asks for (``v1beta2``, the version stored and the one services read)."""

    channel: Annotated[
        ComputeDomainChannel, Meta(description="The IMEX channel and the claim template.")
    ]
    failover: Annotated[
        FailoverSpec,
        Meta(description="cdo addition: failover of a slice whose clique is lost."),
    ] = msgspec.field(default_factory=FailoverSpec)
    gang: (
        Annotated[
            GangSpec,
            Meta(
                description="cdo addition: gang size, slices and spread.",
                extra_json_schema={
                    "x-kubernetes-validations": [
                        rule(
                            "!has(self.size) || !has(self.nodes) || self.nodes <= self.size",
                            "spec.gang.nodes must not exceed spec.gang.size: every node needs "
                            "at least one pod",
                            field_path=".nodes",
                        ),
                        rule(
                            "!has(self.unitLabel) || has(self.size)",
                            "spec.gang.size is required with spec.gang.unitLabel: it is the "
                            "number of pods in each unit",
                            field_path=".size",
                        ),
                    ]
                },
            ),
        ]
        | None
    ) = None


class ComputeDomainSpecV1beta1(ComputeDomainSpec, frozen=True, kw_only=True):
    """The ``v1beta1`` spec: v1beta2's and NVIDIA's older ``numNodes``."""

    num_nodes: (
        Annotated[
            int,
            Meta(
                description="NVIDIA's field (deprecated there, gone from v1beta2, which keeps it "
                "in the annotation resource.nvidia.com/computedomain-num-nodes), accepted for "
                "compatibility: there it only feeds the global status. cdo does not use it to "
                "place pods or to bound the domain's size; spec.gang.nodes spreads a gang.",
                ge=0,
                le=MAX_NUM_NODES,
            ),
        ]
        | None
    ) = None


SPEC_RULES: list[dict[str, Any]] = []
ROOT_RULES = [
    rule(
        "size(self.metadata.name) <= 63",
        "metadata.name must be no more than 63 characters: it is the value of label "
        "cdo.dev/compute-domain on the domain's claims",
    )
]


# -- status ------------------------------------------------------------------------------------


class DomainCondition(CrdStruct, frozen=True, kw_only=True):
    """One aspect of the domain's state (the shape of metav1.Condition)."""

    type: Annotated[
        str, Meta(description="Ready, Placed, Degraded or Deleting.", min_length=1, max_length=316)
    ]
    status: ConditionStatus
    reason: Annotated[
        str,
        Meta(
            description="Why, in CamelCase, for machines.",
            min_length=1,
            max_length=1024,
            pattern=CONDITION_REASON,
        ),
    ]
    message: Annotated[str, Meta(description="Why, for people.", max_length=32768)]
    last_transition_time: Annotated[datetime, Meta(description="When status last changed.")]
    observed_generation: Annotated[
        int, Meta(description="metadata.generation the condition was computed for.", ge=0)
    ] = 0


class ComputeDomainNode(CrdStruct, frozen=True, kw_only=True):
    """A node the domain's pods run on (NVIDIA's status.nodes entry)."""

    name: Annotated[str, Meta(description="Node name.", min_length=1)]
    ip_address: Annotated[str, Meta(description="The node's InternalIP (its IMEX address).")] = ""
    clique_id: Annotated[
        str,
        Meta(
            description='The node\'s NVLink clique, "<cluster UUID>.<clique id>"; "" on a node '
            "without multi-node NVLink."
        ),
    ] = msgspec.field(default="", name="cliqueID")
    index: Annotated[
        int,
        Meta(
            description="The node's IMEX slot (tray index) in its own clique; -1 on a node "
            "without multi-node NVLink.",
            ge=-1,
        ),
    ] = 0
    status: Annotated[
        DomainState,
        Meta(description="Ready when its IMEX daemon is READY, no fault, and its pods run."),
    ] = "NotReady"


class ComputeDomainClique(CrdStruct, frozen=True, kw_only=True):
    """cdo addition: one NVLink clique the domain uses, with its slices there."""

    clique: Annotated[str, Meta(description='"<cluster UUID>.<clique id>".', min_length=1)]
    channel: Annotated[
        int,
        Meta(description="The domain's IMEX channel in this clique.", ge=0, le=MAX_CHANNELS - 1),
    ]
    slices: Annotated[
        tuple[int, ...], Meta(description="Indexes of the domain's slices in this clique.")
    ] = ()
    nodes: Annotated[int, Meta(description="Member nodes in this clique.", ge=0)] = 0
    ready_nodes: Annotated[
        int, Meta(description="Member nodes in this clique that are Ready.", ge=0)
    ] = 0
    pods: Annotated[int, Meta(description="Pods placed in this clique.", ge=0)] = 0
    running_pods: Annotated[
        int, Meta(description="Of those, pods running on their member node.", ge=0)
    ] = 0


class ComputeDomainStatus(CrdStruct, frozen=True, kw_only=True):
    """What the domain controller observed; written only by it."""

    status: Annotated[
        DomainState, Meta(description="Ready when condition Ready is True (NVIDIA's field).")
    ] = "NotReady"
    nodes: Annotated[
        tuple[ComputeDomainNode, ...],
        Meta(
            description="Member nodes, by clique and then IMEX slot (NVIDIA's field).",
            extra_json_schema={
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
            },
        ),
    ] = ()
    conditions: Annotated[
        tuple[DomainCondition, ...],
        Meta(
            description="cdo addition: Ready, Placed, Degraded; Deleting while deleted.",
            extra_json_schema={
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"],
            },
        ),
    ] = ()
    observed_generation: Annotated[
        int, Meta(description="cdo addition: metadata.generation this status is for.", ge=0)
    ] = 0
    clique: (
        Annotated[
            str,
            Meta(
                description="cdo addition: the NVLink clique of a domain placed in one clique "
                "(see cliques for a domain in several)."
            ),
        ]
        | None
    ) = None
    channel: (
        Annotated[
            int,
            Meta(
                description="cdo addition: the IMEX channel of a domain placed in one clique, "
                "unique within it.",
                ge=0,
                le=MAX_CHANNELS - 1,
            ),
        ]
        | None
    ) = None
    cliques: Annotated[
        tuple[ComputeDomainClique, ...],
        Meta(
            description="cdo addition: every clique the domain's slices use, with its channel "
            "and readiness there.",
            extra_json_schema={
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["clique"],
            },
        ),
    ] = ()

    def condition(self, kind: str) -> DomainCondition | None:
        return next((c for c in self.conditions if c.type == kind), None)


class ComputeDomain(KubeObject, frozen=True, kw_only=True):
    spec: ComputeDomainSpec
    status: ComputeDomainStatus = msgspec.field(default_factory=ComputeDomainStatus)

    @property
    def template_name(self) -> str:
        return self.spec.channel.resource_claim_template.name

    @property
    def deleting(self) -> bool:
        return self.metadata.deletion_timestamp is not None
