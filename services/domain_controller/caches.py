"""The controller's informers, their indexes, and which domains each change concerns.

- ComputeDomains, indexed by ``namespace/template name``: the domain itself;
- Placements, indexed by every member node of every slice: the domain of the same name;
- ResourceClaimTemplates: every domain naming the template, and its ComputeDomain owner;
- Pods, indexed by the ``namespace/template name`` of each claim: every domain whose template
  a claim of the pod names (only when the pod's phase, node or claims changed);
- Nodes: every domain with the node in a slice of its Placement (only when the node's IMEX
  condition, kubelet readiness, fault taints, clique label or address changed, not on
  heartbeats);
- the channel DeviceClass: the DeviceClass loop.

All informers run on every replica, leader or not, so a standby takes over with warm caches.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from services.domain_controller.facts import node_facts, pod_facts
from services.domain_controller.objects import DomainNode, DomainPod
from services.domain_controller.settings import DomainControllerSettings
from shared.crds.computedomain import ComputeDomain
from shared.crds.definitions import COMPUTE_DOMAINS, PLACEMENTS
from shared.crds.names import CHANNEL_DEVICE_CLASS
from shared.crds.placement import Placement
from shared.kube.client import KubeClient
from shared.kube.informer import Informer
from shared.kube.keys import ObjectKey
from shared.kube.mapping import map_by_owner
from shared.kube.meta import KubeObject
from shared.kube.models import DeviceClass, ResourceClaimTemplate
from shared.kube.resources import DEVICE_CLASSES, NODES, PODS, RESOURCE_CLAIM_TEMPLATES
from shared.kube.workqueue import WorkQueue
from shared.metrics import Metrics

BY_TEMPLATE = "template"
BY_NODE = "node"
DEVICE_CLASS_KEY = ObjectKey(namespace="", name=CHANNEL_DEVICE_CLASS)

_template_owner = map_by_owner(group=COMPUTE_DOMAINS.group, kind=COMPUTE_DOMAINS.kind)


def template_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def _key(obj: KubeObject) -> ObjectKey:
    return ObjectKey(namespace=obj.metadata.namespace, name=obj.metadata.name)


def _both(old: KubeObject | None, new: KubeObject | None) -> Iterable[KubeObject]:
    return [obj for obj in (old, new) if obj is not None]


class Caches:
    """Informers for everything a domain's status depends on."""

    def __init__(
        self, client: KubeClient, *, settings: DomainControllerSettings, metrics: Metrics
    ) -> None:
        namespace = settings.namespace
        tuning = settings.informer
        self.domains = Informer(
            client,
            COMPUTE_DOMAINS,
            ComputeDomain,
            namespace=namespace,
            settings=tuning,
            metrics=metrics,
        )
        self.placements = Informer(
            client, PLACEMENTS, Placement, namespace=namespace, settings=tuning, metrics=metrics
        )
        self.templates = Informer(
            client,
            RESOURCE_CLAIM_TEMPLATES,
            ResourceClaimTemplate,
            namespace=namespace,
            settings=tuning,
            metrics=metrics,
        )
        self.pods = Informer(
            client, PODS, DomainPod, namespace=namespace, settings=tuning, metrics=metrics
        )
        self.nodes = Informer(client, NODES, DomainNode, settings=tuning, metrics=metrics)
        self.device_classes = Informer(
            client,
            DEVICE_CLASSES,
            DeviceClass,
            field_selector=f"metadata.name={CHANNEL_DEVICE_CLASS}",
            settings=tuning,
            metrics=metrics,
        )
        self.domains.add_index(
            BY_TEMPLATE,
            lambda d: [template_key(d.metadata.namespace, d.template_name)],
        )
        self.placements.add_index(BY_NODE, lambda p: list(p.spec.nodes))
        self.pods.add_index(BY_TEMPLATE, lambda pod: pod.template_keys())

    @property
    def informers(self) -> list[Informer[Any]]:
        return [
            self.domains,
            self.placements,
            self.templates,
            self.pods,
            self.nodes,
            self.device_classes,
        ]

    @property
    def synced(self) -> bool:
        return all(informer.synced for informer in self.informers)

    async def wait_synced(self) -> None:
        await asyncio.gather(*(informer.wait_synced() for informer in self.informers))

    # -- lookups the reconciler uses ---------------------------------------------------------

    def domain_alive(self, namespace: str, name: str, uid: str) -> bool:
        domain = self.domains.cache.get(template_key(namespace, name))
        return domain is not None and domain.metadata.uid == uid

    def domains_naming(self, namespace: str, template: str) -> list[ObjectKey]:
        return [
            _key(domain)
            for domain in self.domains.cache.by_index(
                BY_TEMPLATE, template_key(namespace, template)
            )
        ]

    def pods_using(self, namespace: str, template: str) -> list[DomainPod]:
        return self.pods.cache.by_index(BY_TEMPLATE, template_key(namespace, template))

    # -- routing changes to keys -------------------------------------------------------------

    def route(self, domains: WorkQueue[ObjectKey], device_classes: WorkQueue[ObjectKey]) -> None:
        """Add the handlers that queue the keys each change concerns."""

        def on_domain(old: ComputeDomain | None, new: ComputeDomain | None) -> None:
            for obj in _both(old, new):
                domains.add(_key(obj))

        def on_placement(old: Placement | None, new: Placement | None) -> None:
            for obj in _both(old, new):
                domains.add(_key(obj))

        def on_template(
            old: ResourceClaimTemplate | None, new: ResourceClaimTemplate | None
        ) -> None:
            for obj in _both(old, new):
                for key in self.domains_naming(obj.metadata.namespace, obj.metadata.name):
                    domains.add(key)
                for key in _template_owner(obj):
                    domains.add(key)

        def on_pod(old: DomainPod | None, new: DomainPod | None) -> None:
            if (
                old is not None
                and new is not None
                and pod_facts(old) == pod_facts(new)
                and old.template_keys() == new.template_keys()
            ):
                return  # nothing a domain's status depends on changed
            templates = {key for pod in (old, new) if pod for key in pod.template_keys()}
            for template in templates:
                for domain in self.domains.cache.by_index(BY_TEMPLATE, template):
                    domains.add(_key(domain))

        def on_node(old: DomainNode | None, new: DomainNode | None) -> None:
            if old is not None and new is not None and node_facts(old) == node_facts(new):
                return  # heartbeats and unrelated conditions
            node = new or old
            assert node is not None
            for placement in self.placements.cache.by_index(BY_NODE, node.metadata.name):
                domains.add(_key(placement))

        def on_device_class(old: DeviceClass | None, new: DeviceClass | None) -> None:
            device_classes.add(DEVICE_CLASS_KEY)

        self.domains.add_handler(on_domain)
        self.placements.add_handler(on_placement)
        self.templates.add_handler(on_template)
        self.pods.add_handler(on_pod)
        self.nodes.add_handler(on_node)
        self.device_classes.add_handler(on_device_class)
