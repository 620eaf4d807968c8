"""Which domains each change concerns: pure ``(old, new) -> keys`` functions, one per kind.

- a ComputeDomain or a Placement: the domain of the same name;
- a ResourceClaimTemplate: every domain naming the template, and its ComputeDomain owner;
- a pod: every domain whose template a claim of the pod names, only when the pod's phase, node
  or claims changed;
- a node: every domain with the node in a slice of its Placement, only when the node's IMEX
  condition, kubelet readiness, fault taints, clique label or address changed (not on
  heartbeats);
- the channel DeviceClass: the DeviceClass loop's one key;
- DeviceTaintRule served or not (an upgrade, a downgrade): every domain.

The functions read the caches only through the lookups they are given, so a test calls them
with plain dicts. :func:`connect` registers them as the informers' handlers.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from services.domain_controller.caches import BY_NODE, BY_TEMPLATE, Caches, template_key
from services.domain_controller.facts import node_facts, pod_facts
from services.domain_controller.objects import DomainNode, DomainPod
from shared.crds.computedomain import ComputeDomain
from shared.crds.definitions import COMPUTE_DOMAINS
from shared.crds.names import CHANNEL_DEVICE_CLASS
from shared.kube.keys import ObjectKey, key_of
from shared.kube.mapping import enqueue_routed, map_by_owner
from shared.kube.meta import KubeObject
from shared.kube.models import DeviceClass, ResourceClaimTemplate
from shared.kube.ownwrites import OwnWrites
from shared.kube.workqueue import WorkQueue

DEVICE_CLASS_KEY = ObjectKey(namespace="", name=CHANNEL_DEVICE_CLASS)

Lookup = Callable[[str], list[ObjectKey]]
"""Keys of the domains an index value (a ``namespace/template`` or a node name) points to."""

_template_owner = map_by_owner(group=COMPUTE_DOMAINS.group, kind=COMPUTE_DOMAINS.kind)


def _unique(keys: list[ObjectKey]) -> list[ObjectKey]:
    return list(dict.fromkeys(keys))


def same_name(old: KubeObject | None, new: KubeObject | None) -> list[ObjectKey]:
    """A ComputeDomain or its Placement: the domain of that name (before and after)."""
    return _unique([key_of(obj) for obj in (old, new) if obj is not None])


def template_changed(
    old: ResourceClaimTemplate | None, new: ResourceClaimTemplate | None, *, naming: Lookup
) -> list[ObjectKey]:
    """Domains naming the template (``naming(namespace/name)``) and its ComputeDomain owner."""
    keys: list[ObjectKey] = []
    for obj in (old, new):
        if obj is not None:
            keys.extend(naming(template_key(obj.metadata.namespace, obj.metadata.name)))
            keys.extend(_template_owner(obj))
    return _unique(keys)


def pod_changed(old: DomainPod | None, new: DomainPod | None, *, naming: Lookup) -> list[ObjectKey]:
    """Domains whose template a claim of the pod names, when what status reads changed."""
    if (
        old is not None
        and new is not None
        and pod_facts(old) == pod_facts(new)
        and old.template_keys() == new.template_keys()
    ):
        return []  # nothing a domain's status depends on changed
    templates = sorted({key for pod in (old, new) if pod for key in pod.template_keys()})
    return _unique([key for template in templates for key in naming(template)])


def node_changed(
    old: DomainNode | None, new: DomainNode | None, *, placed_on: Lookup
) -> list[ObjectKey]:
    """Domains with the node in their Placement, when what status reads about it changed."""
    if old is not None and new is not None and node_facts(old) == node_facts(new):
        return []  # heartbeats and unrelated conditions
    node = new or old
    return [] if node is None else placed_on(node.metadata.name)


def device_class_changed(old: DeviceClass | None, new: DeviceClass | None) -> list[ObjectKey]:
    """The channel DeviceClass (the informer watches no other): the DeviceClass loop's key."""
    return [DEVICE_CLASS_KEY]


def connect(
    caches: Caches,
    *,
    domains: WorkQueue[ObjectKey],
    device_classes: WorkQueue[ObjectKey],
    own: OwnWrites[ComputeDomain],
) -> None:
    """Register the handlers: our own writes learn their echoes first, then keys are queued."""

    def naming(template: str) -> list[ObjectKey]:
        return [key_of(d) for d in caches.domains.cache.by_index(BY_TEMPLATE, template)]

    def placed_on(node: str) -> list[ObjectKey]:
        return [key_of(p) for p in caches.placements.cache.by_index(BY_NODE, node)]

    def echo(old: ComputeDomain | None, new: ComputeDomain | None) -> None:
        own.observe(old, new)  # whether the change was ours does not matter here

    caches.domains.add_handler(echo)
    caches.domains.add_handler(enqueue_routed(domains, same_name))
    caches.placements.add_handler(enqueue_routed(domains, same_name))
    caches.templates.add_handler(enqueue_routed(domains, partial(template_changed, naming=naming)))
    caches.pods.add_handler(enqueue_routed(domains, partial(pod_changed, naming=naming)))
    caches.nodes.add_handler(enqueue_routed(domains, partial(node_changed, placed_on=placed_on)))
    caches.device_classes.add_handler(enqueue_routed(device_classes, device_class_changed))

    def every_domain() -> None:
        for domain in caches.domains.cache.objects():
            domains.add(key_of(domain))

    caches.device_taint_rules.add_listener(every_domain)
