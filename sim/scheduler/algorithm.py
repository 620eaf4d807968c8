"""One scheduling cycle for one pod: the decision, as a pure function of the cluster view.

1. Pre-filter: resolve the pod's ResourceClaims (each must exist, be made for this pod when it
   comes from a template, not be going away, name DeviceClasses that exist and selectors that
   compile) and count inter-pod affinity once (:mod:`sim.scheduler.interpod`).
2. Filter every node, in name order: unschedulable, taints (a NotReady node counts as tainted),
   nodeSelector and node affinity, resources, inter-pod affinity, then DRA allocation.
3. Score the feasible nodes (least allocated) and take the best; ties go to the first name.

The result is a :class:`Placement` (node and claim allocations) or :class:`Unschedulable` with
kube-scheduler's message and the :data:`~sim.scheduler.state.Kind` values of the failures, which
say what kind of cluster change could make the pod schedulable.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

import msgspec

from shared.kube.models import DeviceTaintRule
from sim.scheduler.cel import SelectorCache
from sim.scheduler.devices import DeviceRef, DeviceView
from sim.scheduler.dra import ClaimAllocation, allocate_on_node, claim_problems
from sim.scheduler.facts import NodeFacts, NodeUsage, PodFacts
from sim.scheduler.filters import NODE_AFFINITY, TOO_MANY_PODS, UNSCHEDULABLE, node_filter_reasons
from sim.scheduler.interpod import AFFINITY, PodLookup, filter_interpod, interpod_state
from sim.scheduler.message import unschedulable_message
from sim.scheduler.objects import DeviceClass, ResourceClaim
from sim.scheduler.scoring import least_allocated
from sim.scheduler.state import Kind

MAX_RESERVATIONS = 256


class ClusterView(PodLookup, Protocol):
    """What a scheduling cycle reads (implemented by :class:`~sim.scheduler.state.ClusterState`)."""

    def node_names(self) -> Sequence[str]: ...

    def node(self, name: str) -> NodeFacts | None: ...

    def usage(self, name: str) -> NodeUsage: ...

    def claim(self, namespace: str, name: str) -> ResourceClaim | None: ...

    def device_classes(self) -> Mapping[str, DeviceClass]: ...

    def devices_for(self, node: NodeFacts) -> Sequence[DeviceView]: ...

    def devices_in_use(self) -> Collection[DeviceRef]: ...

    def device_taint_rules(self) -> Sequence[DeviceTaintRule]: ...

    @property
    def honour_device_taints(self) -> bool: ...


class Placement(msgspec.Struct, frozen=True, kw_only=True):
    node: str
    claims: tuple[ClaimAllocation, ...] = ()
    score: float = 0.0


class Unschedulable(msgspec.Struct, frozen=True, kw_only=True):
    message: str
    kinds: frozenset[Kind]


def _kind_of(reason: str) -> Kind:
    if reason in (UNSCHEDULABLE, NODE_AFFINITY) or reason.startswith("node(s) had untolerated"):
        return "node"
    if reason == TOO_MANY_PODS or reason.startswith("Insufficient "):
        return "resources"
    if reason == AFFINITY:
        return "affinity"
    if reason.startswith("node(s) didn't") and "anti-affinity" in reason:
        return "anti-affinity"
    return "dra"


def claim_not_created(pod: PodFacts, view: ClusterView) -> str | None:
    """Why the pod cannot be tried yet because one of its claims does not exist, or None.

    kube-scheduler's DRA plugin checks this before a pod enters the scheduling queue
    (PreEnqueue): such a pod is not attempted, gets no status, and is tried as soon as the
    claim or the pod's claim status appears.
    """
    for ref in pod.claims:
        if not ref.needed:
            continue
        if not ref.claim_name:
            return f'waiting for resource claim "{ref.pod_claim}" to be created'
        if view.claim(pod.namespace, ref.claim_name) is None:
            return f'resourceclaim "{ref.claim_name}" not found'
    return None


def resolve_claims(pod: PodFacts, view: ClusterView) -> tuple[ResourceClaim, ...] | str:
    """The pod's claims, each once, or why the pod must wait before any node is considered."""
    missing = claim_not_created(pod, view)
    if missing is not None:
        return missing
    claims: dict[str, ResourceClaim] = {}
    for ref in pod.claims:
        if not ref.needed:
            continue
        claim = view.claim(pod.namespace, ref.claim_name)
        assert claim is not None  # claim_not_created looked
        if claim.metadata.deletion_timestamp is not None:
            return f'resourceclaim "{ref.claim_name}" is being deleted'
        if ref.from_template and not any(o.uid == pod.uid for o in claim.metadata.owner_references):
            return f'resourceclaim "{ref.claim_name}" was not created for pod "{pod.name}"'
        reserved = claim.status.reserved_for
        if len(reserved) >= MAX_RESERVATIONS and not any(r.uid == pod.uid for r in reserved):
            return f'resourceclaim "{ref.claim_name}" is in use by too many consumers'
        problems = claim_problems(claim, view.device_classes())
        if problems:
            return f'resourceclaim "{ref.claim_name}": {"; ".join(problems)}'
        claims[claim.key] = claim
    return tuple(claims.values())


def schedule_pod(
    pod: PodFacts, view: ClusterView, *, cache: SelectorCache
) -> Placement | Unschedulable:
    """Decide where ``pod`` goes (see the module docstring)."""
    names = view.node_names()
    claims = resolve_claims(pod, view)
    if isinstance(claims, str):
        return Unschedulable(
            message=unschedulable_message(total_nodes=len(names), reasons={}, pre_filter=claims),
            kinds=frozenset(("dra",)),
        )
    affinity = interpod_state(pod, view)
    classes = view.device_classes()
    in_use = view.devices_in_use()
    rules = view.device_taint_rules()
    reasons: dict[str, int] = {}
    best: Placement | None = None
    for name in names:
        node = view.node(name)
        if node is None:
            continue
        usage = view.usage(name)
        failed = node_filter_reasons(pod, node, usage) or filter_interpod(pod, node, affinity)
        allocations: tuple[ClaimAllocation, ...] = ()
        if not failed and claims:
            outcome = allocate_on_node(
                claims,
                node=node,
                devices=view.devices_for(node),
                classes=classes,
                in_use=in_use,
                cache=cache,
                rules=rules,
                honour_taints=view.honour_device_taints,
            )
            if isinstance(outcome, str):
                failed = (outcome,)
            else:
                allocations = outcome
        if failed:
            for reason in failed:
                reasons[reason] = reasons.get(reason, 0) + 1
            continue
        score = least_allocated(pod, node, usage)
        if best is None or score > best.score:
            best = Placement(node=name, claims=allocations, score=score)
    if best is not None:
        return best
    return Unschedulable(
        message=unschedulable_message(total_nodes=len(names), reasons=reasons),
        kinds=frozenset(_kind_of(r) for r in reasons) or frozenset(("node",)),
    )
