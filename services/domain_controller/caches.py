"""The controller's informers, their indexes, and the lookups the reconciler reads.

- ComputeDomains, indexed by ``namespace/template name``;
- Placements, indexed by every member node of every slice;
- ResourceClaimTemplates;
- Pods, indexed by the ``namespace/template name`` of each claim;
- Nodes;
- the channel DeviceClass;
- whether the server serves DeviceTaintRule (an optional API, shared/kube/presence.py): without
  it a fault of one DRA GPU takes its whole node, which the status of domains whose pods use
  DRA GPUs says.

Which domains a change of each concerns is ``routing.py``'s. All informers run on every
replica, leader or not, so a standby takes over with warm caches (shared/kube/informers.py).
"""

from __future__ import annotations

from services.domain_controller.objects import DomainNode, DomainPod
from services.domain_controller.settings import DomainControllerSettings
from shared.crds.computedomain import ComputeDomain
from shared.crds.definitions import COMPUTE_DOMAINS, PLACEMENTS
from shared.crds.gpuclaims import asks_for_gpus
from shared.crds.names import CHANNEL_DEVICE_CLASS
from shared.crds.placement import Placement
from shared.kube.apis import DEVICE_TAINT_RULES_API
from shared.kube.client import KubeClient
from shared.kube.informers import InformerSet
from shared.kube.keys import ObjectKey, key_of
from shared.kube.models import DeviceClass, ResourceClaimTemplate
from shared.kube.resources import DEVICE_CLASSES, NODES, PODS, RESOURCE_CLAIM_TEMPLATES
from shared.metrics import Metrics

BY_TEMPLATE = "template"
BY_NODE = "node"


def template_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


class Caches(InformerSet):
    """Informers for everything a domain's status depends on."""

    def __init__(
        self, client: KubeClient, *, settings: DomainControllerSettings, metrics: Metrics
    ) -> None:
        super().__init__(
            client, settings=settings.informer, metrics=metrics, namespace=settings.namespace
        )
        self.domains = self.informer(COMPUTE_DOMAINS, ComputeDomain)
        self.placements = self.informer(PLACEMENTS, Placement)
        self.templates = self.informer(RESOURCE_CLAIM_TEMPLATES, ResourceClaimTemplate)
        self.pods = self.informer(PODS, DomainPod)
        self.nodes = self.informer(NODES, DomainNode, namespace="")
        self.device_classes = self.informer(
            DEVICE_CLASSES,
            DeviceClass,
            namespace="",
            field_selector=f"metadata.name={CHANNEL_DEVICE_CLASS}",
        )
        self.domains.add_index(
            BY_TEMPLATE,
            lambda d: [template_key(d.metadata.namespace, d.template_name)],
        )
        self.placements.add_index(BY_NODE, lambda p: list(p.spec.nodes))
        self.pods.add_index(BY_TEMPLATE, lambda pod: pod.template_keys())
        self.device_taint_rules = self.presence(DEVICE_TAINT_RULES_API)

    # -- lookups the reconciler uses ---------------------------------------------------------

    def domain_alive(self, namespace: str, name: str, uid: str) -> bool:
        domain = self.domains.cache.get(template_key(namespace, name))
        return domain is not None and domain.metadata.uid == uid

    def domains_naming(self, namespace: str, template: str) -> list[ObjectKey]:
        return [
            key_of(domain)
            for domain in self.domains.cache.by_index(
                BY_TEMPLATE, template_key(namespace, template)
            )
        ]

    def pods_using(self, namespace: str, template: str) -> list[DomainPod]:
        return self.pods.cache.by_index(BY_TEMPLATE, template_key(namespace, template))

    def use_dra_gpus(self, pods: list[DomainPod]) -> bool:
        """Whether a claim of one of ``pods`` comes from a template asking for DRA GPUs."""
        for key in {key for pod in pods for key in pod.template_keys()}:
            template = self.templates.cache.get(key)
            spec = template.spec.get("spec") if template is not None else None
            if isinstance(spec, dict) and asks_for_gpus(spec):
                return True
        return False
