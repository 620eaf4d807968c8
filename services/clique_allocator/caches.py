"""The allocator's informers, their indexes, and the lookups built on them.

Every replica lists and watches, leader or not (shared/kube/informers.py): the webhook needs
ComputeDomains and ResourceClaimTemplates on every replica, and a standby takes over with warm
caches. Which domains a change of each concerns is ``routing.py``'s.

- ComputeDomains, indexed by ``namespace/template name``;
- Placements, indexed by member node;
- ResourceClaimTemplates (the webhook asks whether a template is a domain's);
- Pods, indexed by ``namespace/template name`` of their claims, by controlling owner uid, and by
  node for pods that hold GPUs there, and by node for every bound pod that has not finished;
- Nodes; ReplicaSets, StatefulSets and Jobs (the size of a gang);
- GPUs through NVIDIA's GPU DRA driver (``dragpus.py``): its ResourceSlices (indexed by node),
  ResourceClaims (indexed when they hold its devices), DeviceTaintRules (an optional API:
  before Kubernetes 1.37 the informer stays empty, and the health monitor taints the whole node
  for a fault of one DRA GPU instead, which the node's taints already account for);
- channel attachment devices (``attachments.py``): cdo's own driver's ResourceSlices, and the
  ResourceClaims indexed by the nodes where they hold its devices.
"""

from __future__ import annotations

from typing import Any, Literal

from services.clique_allocator.attachments import (
    attachment_nodes,
    claim_holders,
    published_attachments,
)
from services.clique_allocator.dragpus import (
    NodeDraGpus,
    allocated_gpus,
    dra_gpus,
)
from services.clique_allocator.gang import JOB_KIND, JOBSET_NAME
from services.clique_allocator.objects import (
    Workload,
    claim_owner,
    controller_of,
    finished,
    template_names,
)
from services.clique_allocator.settings import CliqueAllocatorSettings
from shared.crds.computedomain import ComputeDomain
from shared.crds.definitions import COMPUTE_DOMAINS, PLACEMENTS
from shared.crds.names import DOMAIN_LABEL, DRIVER_NAME, GPU_DRA_DRIVER, GPU_RESOURCE
from shared.crds.placement import Placement
from shared.kube.apis import DEVICE_TAINT_RULES_API
from shared.kube.client import KubeClient
from shared.kube.informer import Informer
from shared.kube.informers import InformerSet
from shared.kube.keys import ObjectKey, key_of
from shared.kube.models import (
    DeviceTaintRule,
    Node,
    Pod,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from shared.kube.resources import (
    DEVICE_TAINT_RULES,
    JOBS,
    NODES,
    PODS,
    REPLICA_SETS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    STATEFUL_SETS,
)
from shared.metrics import Metrics

BY_TEMPLATE = "template"
BY_NODE = "node"
BY_OWNER = "owner"
BY_GPU_NODE = "gpu-node"
BY_SLICE_NODE = "slice-node"
BY_GPU_CLAIM = "gpu-claim"
HOLDS_GPUS = "gpus"
BY_BOUND_NODE = "bound-node"
BY_JOBSET = "jobset"
BY_ATTACHMENT_NODE = "attachment-node"

TemplateClass = Literal["domain", "other", "unknown"]


def namespaced(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def pod_template_keys(pod: Pod) -> list[str]:
    return [namespaced(pod.metadata.namespace, name) for name in template_names(pod)]


def gpu_node(pod: Pod) -> list[str]:
    """The node a pod holds GPUs on: bound, not finished, asking for GPUs."""
    if pod.spec.node_name and not finished(pod) and pod.gpus(GPU_RESOURCE) > 0:
        return [pod.spec.node_name]
    return []


def holds_gpus(claim: ResourceClaim) -> list[str]:
    """Indexes a claim allocated devices of the GPU driver."""
    return [HOLDS_GPUS] if allocated_gpus(claim) else []


def bound_node(pod: Pod) -> list[str]:
    """The node a pod is bound to and takes resources on: bound and not finished."""
    return [pod.spec.node_name] if pod.spec.node_name and not finished(pod) else []


def jobset_of(job: Workload) -> list[str]:
    """``namespace/<jobset>`` of a JobSet's Job."""
    name = job.metadata.labels.get(JOBSET_NAME)
    return [namespaced(job.metadata.namespace, name)] if name else []


def owner_uid(pod: Pod) -> list[str]:
    owner = controller_of(pod)
    return [owner.uid] if owner is not None else []


class Caches(InformerSet):
    """Informers for everything placement and the webhook depend on."""

    def __init__(
        self, client: KubeClient, *, settings: CliqueAllocatorSettings, metrics: Metrics
    ) -> None:
        super().__init__(client, settings=settings.informer, metrics=metrics)
        self.domains = self.informer(COMPUTE_DOMAINS, ComputeDomain)
        self.placements = self.informer(PLACEMENTS, Placement)
        self.templates = self.informer(RESOURCE_CLAIM_TEMPLATES, ResourceClaimTemplate)
        self.pods = self.informer(PODS, Pod)
        self.nodes = self.informer(NODES, Node)
        self.workloads: dict[str, Informer[Workload]] = {
            "ReplicaSet": self.informer(REPLICA_SETS, Workload),
            "StatefulSet": self.informer(STATEFUL_SETS, Workload),
            "Job": self.informer(JOBS, Workload),
        }
        self.domains.add_index(
            BY_TEMPLATE, lambda d: [namespaced(d.metadata.namespace, d.template_name)]
        )
        self.placements.add_index(BY_NODE, lambda p: list(p.spec.nodes))
        self.pods.add_index(BY_TEMPLATE, pod_template_keys)
        self.pods.add_index(BY_OWNER, owner_uid)
        self.pods.add_index(BY_GPU_NODE, gpu_node)
        self.slices = self.informer(
            RESOURCE_SLICES,
            ResourceSlice,
            namespace="",
            field_selector=f"spec.driver={GPU_DRA_DRIVER}",
        )
        self.claims = self.informer(RESOURCE_CLAIMS, ResourceClaim)
        self.taint_rules = self.informer(
            DEVICE_TAINT_RULES, DeviceTaintRule, namespace="", optional=DEVICE_TAINT_RULES_API
        )
        self.slices.add_index(
            BY_SLICE_NODE, lambda s: [s.spec.node_name] if s.spec.node_name else []
        )
        self.claims.add_index(BY_GPU_CLAIM, holds_gpus)
        self.attachment_slices = self.informer(
            RESOURCE_SLICES,
            ResourceSlice,
            namespace="",
            field_selector=f"spec.driver={DRIVER_NAME}",
        )
        self.claims.add_index(BY_ATTACHMENT_NODE, attachment_nodes)
        self.pods.add_index(BY_BOUND_NODE, bound_node)
        self.workloads[JOB_KIND].add_index(BY_JOBSET, jobset_of)

    @property
    def webhook_synced(self) -> bool:
        """What the webhook reads is in the caches."""
        return self.domains.synced and self.templates.synced

    @property
    def allocation_synced(self) -> bool:
        """What the channel allocation webhook reads is in the caches."""
        return self.domains.synced and self.pods.synced and self.placements.synced

    # -- lookups -----------------------------------------------------------------------------

    def domain(self, key: ObjectKey) -> ComputeDomain | None:
        return self.domains.cache.get(str(key))

    def workload(self, kind: str, namespace: str, name: str) -> Workload | None:
        informer = self.workloads.get(kind)
        return None if informer is None else informer.cache.get(namespaced(namespace, name))

    def jobset_jobs(self, namespace: str, jobset: str) -> list[Workload]:
        """The Jobs of the JobSet ``namespace/jobset`` (by their ``jobset-name`` label)."""
        return self.workloads[JOB_KIND].cache.by_index(BY_JOBSET, namespaced(namespace, jobset))

    def pods_using(self, namespace: str, template: str) -> list[Pod]:
        """Pods whose claims come from the template ``namespace/template``."""
        return self.pods.cache.by_index(BY_TEMPLATE, namespaced(namespace, template))

    def domains_of(self, pod: Pod) -> list[ObjectKey]:
        """Domains whose template one of the pod's claims comes from."""
        return [
            key_of(domain)
            for template in pod_template_keys(pod)
            for domain in self.domains.cache.by_index(BY_TEMPLATE, template)
        ]

    def pods_owned_by(self, uid: str) -> list[Pod]:
        return self.pods.cache.by_index(BY_OWNER, uid)

    def gpu_pods(self) -> list[tuple[str, list[Pod]]]:
        """Per node, the pods holding GPUs there."""
        return [
            (node, self.pods.cache.by_index(BY_GPU_NODE, node))
            for node in self.pods.cache.index_values(BY_GPU_NODE)
        ]

    def dra_gpus(self, recorded: set[tuple[str, str]]) -> dict[str, NodeDraGpus]:
        """Per node, its DRA GPUs; claims of the ``recorded`` (namespace, pod) are accounted
        for by their Placements."""

        def accounted(claim: ResourceClaim) -> bool:
            return claim_owner(claim) in recorded

        return dra_gpus(
            self.slices.cache.objects(),
            self.taint_rules.cache.objects(),
            self.claims.cache.by_index(BY_GPU_CLAIM, HOLDS_GPUS),
            accounted=accounted,
        )

    def published_gpus(self, node: str) -> NodeDraGpus:
        """The node's published DRA GPUs (counts only, for routing node changes)."""
        found = dra_gpus(
            self.slices.cache.by_index(BY_SLICE_NODE, node), (), (), accounted=lambda _: True
        )
        return found.get(node, NodeDraGpus())

    def claim_spec(self, namespace: str, name: str, template: bool) -> dict[str, Any] | None:
        """The claim spec of a pod's claim: its template's, or the ResourceClaim's."""
        key = namespaced(namespace, name)
        if template:
            found = self.templates.cache.get(key)
            spec = found.spec.get("spec") if found is not None else None
            return spec if isinstance(spec, dict) else None
        claim = self.claims.cache.get(key)
        return claim.spec if claim is not None else None

    def attachments(self) -> dict[str, int]:
        """Per node that publishes cdo's ResourceSlice, its channel attachment devices."""
        return published_attachments(self.attachment_slices.cache.objects())

    def attachment_holders(self) -> dict[str, set[str]]:
        """Per node, who holds its allocated attachment devices (``attachments.py``)."""
        return claim_holders(
            claim
            for node in self.claims.cache.index_values(BY_ATTACHMENT_NODE)
            for claim in self.claims.cache.by_index(BY_ATTACHMENT_NODE, node)
        )

    def pods_on(self, node: str) -> list[Pod]:
        """Pods bound to ``node`` and not finished."""
        return self.pods.cache.by_index(BY_BOUND_NODE, node)

    def template_class(self, namespace: str, name: str) -> TemplateClass:
        """Whether claims from ``namespace/name`` belong to a ComputeDomain, as far as the
        caches tell: a template labelled with a domain is one; a template without the label
        is not (a domain naming it has a name conflict and is not served); a template not seen
        yet is one if a domain names it, else unknown."""
        template = self.templates.cache.get(namespaced(namespace, name))
        if template is not None:
            return "domain" if DOMAIN_LABEL in template.metadata.labels else "other"
        if self.domains.cache.by_index(BY_TEMPLATE, namespaced(namespace, name)):
            return "domain"
        return "unknown"
