"""Which domains each change concerns, and whether it changes capacity: pure functions of
``(old, new)``, one per kind.

- a ComputeDomain: itself;
- a Placement: itself, when the change was not the leader's own write (and then capacity
  changed: the view is rebuilt and waiting gangs try again);
- a pod: the domains whose template its claims name, when its phase, gates, pin, node, GPUs,
  owner or deletion changed; a pod outside every Placement that starts or stops holding GPUs on
  a node also changes capacity, and one that binds to or leaves a node at all changes what the
  node's pods request (``usage``: gangs whose pods need CPU or memory there try again);
- a node: the domains with a member on it, when its clique, GPUs, slot, health or
  schedulability changed (heartbeats do nothing); capacity changes with it;
- a ReplicaSet, StatefulSet or Job: the domains of its pods, when the size it wants changed;
- a ResourceSlice of NVIDIA's GPU DRA driver, when its GPUs or their blocking taints changed,
  a DeviceTaintRule, and a ResourceClaim no Placement accounts for whose GPUs changed:
  capacity only (grown unless fewer GPUs are free);
- a ResourceSlice of cdo's own driver, when its channel attachment devices changed: capacity
  (grown unless fewer); a ResourceClaim no Placement accounts for that takes or gives back an
  attachment device: usage (freed when it gave one back).

The functions read the caches only through the lookups they are given and return a
:class:`Routed`; :func:`connect` registers them as the informers' handlers and applies what they
return: the keys are queued, then a capacity change is reported.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import msgspec

from services.clique_allocator.attachments import attachment_nodes, published_attachments
from services.clique_allocator.caches import (
    BY_NODE,
    Caches,
    bound_node,
    gpu_node,
    owner_uid,
    pod_template_keys,
)
from services.clique_allocator.dragpus import NodeDraGpus, allocated_gpus, dra_gpus
from services.clique_allocator.gang import workload_pods
from services.clique_allocator.nodes import node_facts, without_nvlink
from services.clique_allocator.objects import Workload, claim_owner, finished, gated, pinned_to
from shared.crds.computedomain import ComputeDomain
from shared.crds.names import GPU_RESOURCE
from shared.crds.placement import Placement
from shared.kube.keys import ObjectKey, key_of
from shared.kube.mapping import enqueue_routed
from shared.kube.models import DeviceTaintRule, Node, Pod, ResourceClaim, ResourceSlice
from shared.kube.ownwrites import OwnWrites
from shared.kube.workqueue import WorkQueue


class Routed(msgspec.Struct, frozen=True, kw_only=True):
    """What one change concerns."""

    keys: tuple[ObjectKey, ...] = ()
    """Domains to reconcile, in order."""
    capacity: bool | None = None
    """None: capacity did not change; True: it grew (waiting gangs try again); False: it shrank."""
    usage: bool | None = None
    """Requests of pods on a node changed (a pod outside the records bound or left): None
    no; True: a pod left (waiting gangs try again); False: one bound."""


NOTHING = Routed()


def pod_facts(pod: Pod) -> tuple[Any, ...]:
    """What a domain's reconcile depends on about a pod."""
    return (
        finished(pod),
        gated(pod),
        pinned_to(pod),
        pod.spec.node_name,
        pod.metadata.deletion_timestamp is not None,
        pod.gpus(GPU_RESOURCE),
        tuple(pod_template_keys(pod)),
        tuple(owner_uid(pod)),
    )


def domain_changed(old: ComputeDomain | None, new: ComputeDomain | None) -> list[ObjectKey]:
    """A ComputeDomain: itself."""
    return list(dict.fromkeys(key_of(obj) for obj in (old, new) if obj is not None))


def placement_changed(old: Placement | None, new: Placement | None, *, ours: bool) -> Routed:
    """A Placement: nothing when the change is the echo of our own write (``ours``); else its
    domain, and capacity changed."""
    obj = new or old
    if ours or obj is None:
        return NOTHING
    return Routed(keys=(key_of(obj),), capacity=True)


def pod_changed(
    old: Pod | None,
    new: Pod | None,
    *,
    domains_of: Callable[[Pod], list[ObjectKey]],
    recorded: Callable[[Pod], bool],
) -> Routed:
    """A pod: its domains when what a reconcile reads changed; capacity when a pod no
    Placement names (``recorded``) starts or stops holding GPUs on a node."""
    keys: list[ObjectKey] = []
    if old is None or new is None or pod_facts(old) != pod_facts(new):
        keys = sorted({key for pod in (old, new) if pod for key in domains_of(pod)})
    before = gpu_node(old) if old is not None else []
    after = gpu_node(new) if new is not None else []
    pod = new or old
    capacity = usage = None
    bound_before = bound_node(old) if old is not None else []
    bound_after = bound_node(new) if new is not None else []
    if (before != after or bound_before != bound_after) and pod is not None and not recorded(pod):
        if before != after:
            capacity = bool(before)
        if bound_before != bound_after:
            usage = bool(bound_before)
    return Routed(keys=tuple(keys), capacity=capacity, usage=usage)


def node_changed(
    old: Node | None,
    new: Node | None,
    *,
    placed_on: Callable[[str], list[ObjectKey]],
    dra_of: Callable[[str], NodeDraGpus] = lambda _: NodeDraGpus(),
) -> Routed:
    """A node: when its facts changed, the domains with a member on it, and capacity (which
    grew unless the node is gone). ``dra_of`` gives a node's published DRA GPUs."""
    node = new or old
    if node is None:
        return NOTHING
    dra = dra_of(node.metadata.name)
    before = node_facts(old, dra) if old is not None else None
    after = node_facts(new, dra) if new is not None else None
    if before == after:
        # A node on no NVLink fabric that comes or goes changes where domains without IMEX
        # can run; no domain has a member on it.
        was = old is not None and without_nvlink(old, dra)
        now = new is not None and without_nvlink(new, dra)
        return NOTHING if was == now else Routed(keys=(), capacity=now)
    return Routed(keys=tuple(placed_on(node.metadata.name)), capacity=after is not None)


def _usable_gpus(item: ResourceSlice | None) -> tuple[int, int]:
    """(published, free of blocking taints) GPUs of a slice."""
    if item is None:
        return (0, 0)
    counts = dra_gpus([item], (), (), accounted=lambda _: True)
    found = counts.get(item.spec.node_name, NodeDraGpus())
    return (found.published, found.published - found.tainted)


def slice_changed(old: ResourceSlice | None, new: ResourceSlice | None) -> Routed:
    """A GPU driver's slice: capacity, when its GPUs or their blocking taints changed."""
    before, after = _usable_gpus(old), _usable_gpus(new)
    if before == after:
        return NOTHING
    return Routed(capacity=after[1] >= before[1])


def attachment_slice_changed(old: ResourceSlice | None, new: ResourceSlice | None) -> Routed:
    """A cdo slice: capacity, when its attachment devices changed."""
    before = sum(published_attachments([old]).values()) if old is not None else 0
    after = sum(published_attachments([new]).values()) if new is not None else 0
    if before == after:
        return NOTHING
    return Routed(capacity=after > before)


def taint_rule_changed(old: DeviceTaintRule | None, new: DeviceTaintRule | None) -> Routed:
    """A DeviceTaintRule: capacity (taken away unless it went)."""
    if old is not None and new is not None and old.spec == new.spec:
        return NOTHING
    return Routed(capacity=new is None)


def claim_changed(
    old: ResourceClaim | None,
    new: ResourceClaim | None,
    *,
    accounted: Callable[[ResourceClaim], bool],
) -> Routed:
    """A claim no Placement accounts for: capacity, when the GPUs it holds changed; usage,
    when the attachment devices it holds changed."""
    before = allocated_gpus(old) if old is not None else []
    after = allocated_gpus(new) if new is not None else []
    claim = new or old
    if claim is None or accounted(claim):
        return NOTHING
    held_before = attachment_nodes(old) if old is not None else []
    held_after = attachment_nodes(new) if new is not None else []
    usage = None if held_before == held_after else len(held_after) < len(held_before)
    capacity = None if before == after else len(after) < len(before)
    return Routed(capacity=capacity, usage=usage)


def workload_changed(
    kind: str,
    old: Workload | None,
    new: Workload | None,
    *,
    domains_owned_by: Callable[[str], list[ObjectKey]],
) -> list[ObjectKey]:
    """A ReplicaSet, StatefulSet or Job: the domains of its pods, when its size changed."""
    if old is not None and new is not None and workload_pods(kind, old) == workload_pods(kind, new):
        return []
    workload = new or old
    return [] if workload is None else domains_owned_by(workload.metadata.uid)


def recorded_pod(caches: Caches, book: OwnWrites[Placement], pod: Pod) -> bool:
    """The pod is named in its domain's Placement."""
    for key in caches.domains_of(pod):
        text = str(key)
        placement = book.current(text, caches.placements.cache.get(text))
        if placement is not None and pod.metadata.name in placement.spec.pod_names:
            return True
    return False


def accounted_claim(caches: Caches, book: OwnWrites[Placement], claim: ResourceClaim) -> bool:
    """The claim was made for a pod a Placement names (its GPUs count through the record)."""
    owner = claim_owner(claim)
    if owner is None:
        return False
    pod = caches.pods.cache.get(f"{owner[0]}/{owner[1]}")
    return pod is not None and recorded_pod(caches, book, pod)


def connect(
    caches: Caches,
    *,
    queue: WorkQueue[ObjectKey],
    book: OwnWrites[Placement],
    on_capacity: Callable[[bool], None],
    on_usage: Callable[[bool], None] = lambda grew: None,
) -> None:
    """Register the handlers; ``on_capacity(grew)`` hears every capacity change,
    ``on_usage(freed)`` every change of what pods outside the records request on nodes."""

    def apply(routed: Routed) -> None:
        for key in routed.keys:
            queue.add(key)
        if routed.capacity is not None:
            on_capacity(routed.capacity)
        if routed.usage is not None:
            on_usage(routed.usage)

    recorded = functools.partial(recorded_pod, caches, book)

    def placed_on(node: str) -> list[ObjectKey]:
        return [key_of(p) for p in caches.placements.cache.by_index(BY_NODE, node)]

    def domains_owned_by(uid: str) -> list[ObjectKey]:
        return sorted({key for pod in caches.pods_owned_by(uid) for key in caches.domains_of(pod)})

    def on_placement(old: Placement | None, new: Placement | None) -> None:
        apply(placement_changed(old, new, ours=not book.observe(old, new)))

    def on_pod(old: Pod | None, new: Pod | None) -> None:
        apply(pod_changed(old, new, domains_of=caches.domains_of, recorded=recorded))

    def on_node(old: Node | None, new: Node | None) -> None:
        apply(node_changed(old, new, placed_on=placed_on, dra_of=caches.published_gpus))

    def on_claim(old: ResourceClaim | None, new: ResourceClaim | None) -> None:
        apply(claim_changed(old, new, accounted=functools.partial(accounted_claim, caches, book)))

    def on_workload(kind: str) -> Callable[[Workload | None, Workload | None], None]:
        def route(old: Workload | None, new: Workload | None) -> list[ObjectKey]:
            return workload_changed(kind, old, new, domains_owned_by=domains_owned_by)

        return enqueue_routed(queue, route)

    caches.domains.add_handler(enqueue_routed(queue, domain_changed))
    caches.placements.add_handler(on_placement)
    caches.pods.add_handler(on_pod)
    caches.nodes.add_handler(on_node)
    caches.slices.add_handler(lambda old, new: apply(slice_changed(old, new)))
    caches.attachment_slices.add_handler(lambda old, new: apply(attachment_slice_changed(old, new)))
    caches.taint_rules.add_handler(lambda old, new: apply(taint_rule_changed(old, new)))
    caches.claims.add_handler(on_claim)
    for kind, informer in caches.workloads.items():
        informer.add_handler(on_workload(kind))
