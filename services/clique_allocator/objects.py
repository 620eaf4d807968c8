"""The API objects the allocator reads, and the few facts it takes from a pod.

Pods and nodes decode into the shared Structs (:mod:`shared.kube.models`); the workloads that
size a gang (ReplicaSet, StatefulSet, Job) decode into one small Struct of the fields that matter,
their pod template reduced to the claim templates it names and its annotations.
"""

from __future__ import annotations

import msgspec

from shared.crds.names import HOSTNAME_LABEL, PLACEMENT_GATE
from shared.kube.meta import KubeObject, OwnerReference
from shared.kube.models import Pod, ResourceClaim

FINISHED_PHASES = frozenset({"Succeeded", "Failed"})


class _Camel(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    pass


class TemplateClaim(_Camel, frozen=True, kw_only=True):
    resource_claim_template_name: str | None = None


class TemplatePodSpec(_Camel, frozen=True, kw_only=True):
    resource_claims: tuple[TemplateClaim, ...] = ()


class TemplateMeta(_Camel, frozen=True, kw_only=True):
    annotations: dict[str, str] = msgspec.field(default_factory=dict)


class PodTemplate(_Camel, frozen=True, kw_only=True):
    metadata: TemplateMeta = msgspec.field(default_factory=TemplateMeta)
    spec: TemplatePodSpec = msgspec.field(default_factory=TemplatePodSpec)


class WorkloadSpec(_Camel, frozen=True, kw_only=True):
    replicas: int | None = None
    """ReplicaSet and StatefulSet: pods wanted (the API defaults it to 1)."""
    parallelism: int | None = None
    """Job: pods running at once (the API defaults it to 1)."""
    completions: int | None = None
    """Job: successful pods wanted in all; None for a work queue."""
    template: PodTemplate = msgspec.field(default_factory=PodTemplate)
    """The pods it makes: which claim templates they use."""


class WorkloadStatus(_Camel, frozen=True, kw_only=True):
    succeeded: int = 0
    """Job: pods that finished successfully so far."""


class Workload(KubeObject, frozen=True, kw_only=True):
    """A ReplicaSet, StatefulSet or Job, as far as the size of its gang goes."""

    spec: WorkloadSpec = msgspec.field(default_factory=WorkloadSpec)
    status: WorkloadStatus = msgspec.field(default_factory=WorkloadStatus)


def makes_pods_using(workload: Workload, template: str) -> bool:
    """The workload's pods take a claim from the ResourceClaimTemplate ``template``."""
    return any(
        claim.resource_claim_template_name == template
        for claim in workload.spec.template.spec.resource_claims
    )


def gated(pod: Pod) -> bool:
    """The pod still carries the allocator's scheduling gate."""
    return any(gate.name == PLACEMENT_GATE for gate in pod.spec.scheduling_gates)


def finished(pod: Pod) -> bool:
    """The pod ended: it holds no GPU and no slot any more."""
    return pod.status.phase in FINISHED_PHASES


def pinned_to(pod: Pod) -> str:
    """The node the pod's nodeSelector pins it to, or ""."""
    return pod.spec.node_selector.get(HOSTNAME_LABEL, "")


def controller_of(pod: Pod) -> OwnerReference | None:
    """The pod's controlling owner (a ReplicaSet, StatefulSet, Job ...), if any."""
    return next((ref for ref in pod.metadata.owner_references if ref.controller), None)


def claim_owner(claim: ResourceClaim) -> tuple[str, str] | None:
    """(namespace, pod) of the pod a claim was made for from its template, if any."""
    for ref in claim.metadata.owner_references:
        if ref.kind == "Pod" and ref.controller:
            return claim.metadata.namespace, ref.name
    return None


def template_names(pod: Pod) -> list[str]:
    """Names of the ResourceClaimTemplates the pod's claims are made from."""
    return [
        claim.resource_claim_template_name
        for claim in pod.spec.resource_claims
        if claim.resource_claim_template_name
    ]
