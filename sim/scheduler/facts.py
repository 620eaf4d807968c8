"""What the scheduler needs to know of a pod and of a node, computed once from their objects.

:class:`PodFacts` is a pod reduced to its scheduling inputs (requests in milli-units, selectors,
tolerations, affinity terms with their namespaces resolved, claim references); :class:`NodeFacts`
a node reduced to labels, allocatable amounts and effective taints; :class:`NodeUsage` what the
pods on a node (bound or assumed) request together. All are frozen values; the filters and
scoring are pure functions of them.
"""

from __future__ import annotations

import msgspec

from shared.kube.models import Node, Taint, Toleration
from shared.scheduling import requests
from shared.scheduling.requests import (
    CPU,
    DEFAULT_CPU_MILLI,
    DEFAULT_MEMORY_MILLI,
    MEMORY,
    PODS,
    allocatable_amounts,
)
from sim.scheduler.objects import LabelSelector, NodeSelector, Pod, PodAffinity, PodAffinityTerm

GPU = "nvidia.com/gpu"

TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"
TAINT_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"


class AffinityTerm(msgspec.Struct, frozen=True, kw_only=True):
    """A required pod (anti-)affinity term with its namespaces resolved.

    ``namespaces`` and ``namespace_selector`` together say which pods the term looks at: a pod
    in one of ``namespaces``, or in a namespace whose labels ``namespace_selector`` matches. A
    term that names neither looks at its own pod's namespace (resolved into ``namespaces``).
    """

    topology_key: str
    selector: LabelSelector | None
    namespaces: frozenset[str]
    namespace_selector: LabelSelector | None = None


class ClaimRef(msgspec.Struct, frozen=True, kw_only=True):
    """One ``spec.resourceClaims`` entry: the claim it names, once that is known.

    ``claim_name`` is "" while a template's claim has not been created (no entry in
    ``status.resourceClaimStatuses``); ``needed`` is False when the status says none is needed.
    """

    pod_claim: str
    claim_name: str
    from_template: bool
    needed: bool = True


class PodFacts(msgspec.Struct, frozen=True, kw_only=True):
    key: str
    namespace: str
    name: str
    uid: str
    labels: dict[str, str]
    node_name: str
    requests: dict[str, int]
    nonzero_cpu: int
    nonzero_memory: int
    node_selector: dict[str, str]
    node_affinity: NodeSelector | None
    tolerations: tuple[Toleration, ...]
    affinity: tuple[AffinityTerm, ...]
    anti_affinity: tuple[AffinityTerm, ...]
    claims: tuple[ClaimRef, ...]

    def with_node(self, node_name: str) -> PodFacts:
        return msgspec.structs.replace(self, node_name=node_name)


class NodeFacts(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    labels: dict[str, str]
    allocatable: dict[str, int]
    unschedulable: bool
    taints: tuple[Taint, ...]
    ready: bool


class NodeUsage(msgspec.Struct, frozen=True, kw_only=True):
    requested: dict[str, int] = msgspec.field(default_factory=dict)
    nonzero_cpu: int = 0
    nonzero_memory: int = 0
    pods: int = 0

    def plus(self, pod: PodFacts, sign: int = 1) -> NodeUsage:
        """This usage with ``pod`` added (``sign=-1``: removed)."""
        requested = dict(self.requested)
        for resource, amount in pod.requests.items():
            total = requested.get(resource, 0) + sign * amount
            if total:
                requested[resource] = total
            else:
                requested.pop(resource, None)
        return NodeUsage(
            requested=requested,
            nonzero_cpu=self.nonzero_cpu + sign * pod.nonzero_cpu,
            nonzero_memory=self.nonzero_memory + sign * pod.nonzero_memory,
            pods=self.pods + sign,
        )


# -- pods --------------------------------------------------------------------------------------


def pod_requests(pod: Pod) -> tuple[dict[str, int], int, int]:
    """(requests, non-zero CPU, non-zero memory) of ``pod``, in milli-units
    (:func:`shared.scheduling.requests.pod_requests`)."""
    found = requests.pod_requests(pod.spec.containers, pod.spec.init_containers, pod.spec.overhead)
    return found.requests, found.nonzero_cpu, found.nonzero_memory


def _affinity_term(term: PodAffinityTerm, namespace: str) -> AffinityTerm:
    namespaces = frozenset(term.namespaces)
    if not namespaces and term.namespace_selector is None:
        namespaces = frozenset((namespace,))
    return AffinityTerm(
        topology_key=term.topology_key,
        selector=term.label_selector,
        namespaces=namespaces,
        namespace_selector=term.namespace_selector,
    )


def _required_terms(affinity: PodAffinity | None, namespace: str) -> tuple[AffinityTerm, ...]:
    if affinity is None:
        return ()
    required = affinity.required_during_scheduling_ignored_during_execution
    return tuple(_affinity_term(term, namespace) for term in required)


def pod_claims(pod: Pod) -> tuple[ClaimRef, ...]:
    statuses = {s.name: s for s in pod.status.resource_claim_statuses}
    refs: list[ClaimRef] = []
    for entry in pod.spec.resource_claims:
        if entry.resource_claim_name:
            refs.append(
                ClaimRef(
                    pod_claim=entry.name, claim_name=entry.resource_claim_name, from_template=False
                )
            )
            continue
        if not entry.resource_claim_template_name:
            continue
        status = statuses.get(entry.name)
        if status is None:
            refs.append(ClaimRef(pod_claim=entry.name, claim_name="", from_template=True))
        else:
            refs.append(
                ClaimRef(
                    pod_claim=entry.name,
                    claim_name=status.resource_claim_name or "",
                    from_template=True,
                    needed=status.resource_claim_name is not None,
                )
            )
    return tuple(refs)


def pod_facts(pod: Pod) -> PodFacts:
    meta = pod.metadata
    spec = pod.spec
    requests, nonzero_cpu, nonzero_memory = pod_requests(pod)
    affinity = spec.affinity
    node_affinity = None
    terms: tuple[AffinityTerm, ...] = ()
    anti_terms: tuple[AffinityTerm, ...] = ()
    if affinity is not None:
        if affinity.node_affinity is not None:
            node_affinity = (
                affinity.node_affinity.required_during_scheduling_ignored_during_execution
            )
        terms = _required_terms(affinity.pod_affinity, meta.namespace)
        anti_terms = _required_terms(affinity.pod_anti_affinity, meta.namespace)
    return PodFacts(
        key=pod.key,
        namespace=meta.namespace,
        name=meta.name,
        uid=meta.uid,
        labels=meta.labels,
        node_name=spec.node_name,
        requests=requests,
        nonzero_cpu=nonzero_cpu,
        nonzero_memory=nonzero_memory,
        node_selector=spec.node_selector,
        node_affinity=node_affinity,
        tolerations=spec.tolerations,
        affinity=terms,
        anti_affinity=anti_terms,
        claims=pod_claims(pod),
    )


# -- nodes -------------------------------------------------------------------------------------


def node_facts(node: Node) -> NodeFacts:
    """The node's facts; a node that is not Ready carries the taint the node lifecycle
    controller would give it (not-ready, or unreachable when its state is Unknown)."""
    amounts = node.status.allocatable or node.status.capacity
    allocatable = dict(allocatable_amounts(amounts))
    ready_condition = node.condition("Ready")
    ready = ready_condition is not None and ready_condition.status == "True"
    taints = node.spec.taints
    if not ready:
        unknown = ready_condition is not None and ready_condition.status == "Unknown"
        key = TAINT_UNREACHABLE if unknown else TAINT_NOT_READY
        if not any(t.key == key and t.effect == "NoSchedule" for t in taints):
            taints = (*taints, Taint(key=key, effect="NoSchedule"))
    return NodeFacts(
        name=node.metadata.name,
        labels=node.metadata.labels,
        allocatable=allocatable,
        unschedulable=node.spec.unschedulable,
        taints=taints,
        ready=ready,
    )


__all__ = [
    "CPU",
    "DEFAULT_CPU_MILLI",
    "DEFAULT_MEMORY_MILLI",
    "MEMORY",
    "PODS",
    "AffinityTerm",
    "ClaimRef",
    "NodeFacts",
    "NodeUsage",
    "PodFacts",
    "node_facts",
    "pod_claims",
    "pod_facts",
    "pod_requests",
]
