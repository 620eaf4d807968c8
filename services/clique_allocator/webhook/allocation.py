"""Whether the scheduler may give a claim one of cdo's attachment devices (pure).

Each node publishes a few attachment devices (two per GPU), and every pod that gets a domain's
IMEX channel holds one. A device held by a pod the IMEX agent refuses is still held: the
scheduler allocated it, and nothing frees it while that pod waits. So the allocation itself is
judged, where it happens: the scheduler writes a claim's allocation and its ``reservedFor`` pod
in one update of ``resourceclaims/status``, and the validating webhook
``channel-allocation.clique-allocator.cdo.dev`` (its configuration: :mod:`.configuration`) sends
the allocator every such write whose result holds a device of cdo's driver. The answer comes
from the allocator's caches, on every replica.

A write that gives nothing (no new consumer, the same devices: a release, a deallocation, a
no-op) is allowed. Otherwise the claim gets the device only when all of these hold, checked in
this order, each refusal naming what failed:

=====================  ======================================================================
``Consumers``          the claim is reserved for exactly one pod
``UnknownPod``         that pod is in the allocator's view, with that uid (retriable: a pod
                       the watch has not shown yet)
``NotFromTemplate``    the claim is the one the pod's ``status.resourceClaimStatuses`` names
                       for a claim of the pod made from a ResourceClaimTemplate, and the pod
                       controls it (its controlling owner reference): a claim made by hand,
                       or another pod's, is refused
``NotADomain``         that template is a ComputeDomain's, in the claim's namespace
``SeveralClaims``      the pod takes one claim of that template (one attachment device per pod)
``NotPlaced``          the domain has a Placement (retriable: the allocator writes it before it
                       pins the domain's pods)
``NotPinned``          the Placement seats that pod, by name and uid, on the node the devices
                       are on: it is a member the allocator pinned there
=====================  ======================================================================

A domain whose Placement says it runs without IMEX (``multiNodeNvlink: false``) seats no pod:
the scheduler places its pods, and their claims from the domain's template are allowed
wherever it puts them (docs/security.md lists this among what remains open).

Why a webhook and not an admission policy, binding conditions or a reclaim: docs/security.md
("Attachment devices").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec

from shared.crds.computedomain import ComputeDomain
from shared.crds.names import DRIVER_NAME
from shared.crds.placement import Placement
from shared.kube.models import Pod, ResourceClaim, ResourceClaimConsumerReference

WEBHOOK = "channel-allocation"
"""The webhook's label in ``cdo_admissions_total``."""


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    """The answer: allowed, or refused with a reason (one word) and a message."""

    allowed: bool
    reason: str = ""
    message: str = ""


ALLOWED = Verdict(allowed=True)


def _refused(reason: str, message: str) -> Verdict:
    return Verdict(allowed=False, reason=reason, message=message)


def cdo_devices(claim: ResourceClaim | None) -> frozenset[tuple[str, str]]:
    """The (pool, device) pairs of cdo's driver the claim has allocated."""
    if claim is None or claim.status.allocation is None:
        return frozenset()
    return frozenset(
        (result.pool, result.device)
        for result in claim.status.allocation.devices.results
        if result.driver == DRIVER_NAME
    )


def _pods(refs: Sequence[ResourceClaimConsumerReference]) -> list[ResourceClaimConsumerReference]:
    return [ref for ref in refs if ref.resource == "pods" and not ref.api_group]


def gives_a_device(claim: ResourceClaim, old: ResourceClaim | None) -> bool:
    """Whether the write hands a cdo device to someone: a device that was not there, or a
    consumer that was not there, on a claim that holds one."""
    devices = cdo_devices(claim)
    if not devices:
        return False
    before = {ref.uid for ref in (old.status.reserved_for if old is not None else ())}
    added = any(ref.uid not in before for ref in claim.status.reserved_for)
    return added or devices != cdo_devices(old)


def _template_of(pod: Pod, claim: ResourceClaim) -> str:
    """The template the pod's claim named ``claim`` was made from ("" when it was not)."""
    entry = next(
        (
            status.name
            for status in pod.status.resource_claim_statuses
            if status.resource_claim_name == claim.metadata.name
        ),
        None,
    )
    if entry is None:
        return ""
    spec = next((c for c in pod.spec.resource_claims if c.name == entry), None)
    return spec.resource_claim_template_name or "" if spec is not None else ""


def _controlled_by(claim: ResourceClaim, uid: str) -> bool:
    return any(
        ref.kind == "Pod" and ref.controller and ref.uid == uid
        for ref in claim.metadata.owner_references
    )


def judge(
    *,
    claim: ResourceClaim,
    old: ResourceClaim | None,
    pod_named: Callable[[str], Pod | None],
    domains_using: Callable[[str], Sequence[ComputeDomain]],
    placement_of: Callable[[str], Placement | None],
) -> Verdict:
    """The verdict on one write of ``claim``'s status (``old``: before it).

    The lookups are in the claim's namespace: ``pod_named`` a pod by name, ``domains_using``
    the ComputeDomains whose claim template has that name, ``placement_of`` a domain's
    Placement by the domain's name.
    """
    if not gives_a_device(claim, old):
        return ALLOWED
    where = f"ResourceClaim {claim.metadata.namespace}/{claim.metadata.name}"
    consumers = _pods(claim.status.reserved_for)
    if len(consumers) != 1 or len(claim.status.reserved_for) != 1:
        return _refused(
            "Consumers",
            f"{where} is reserved for {len(claim.status.reserved_for)} consumers: a claim that "
            "holds a cdo attachment device serves exactly one pod",
        )
    (ref,) = consumers
    pod = pod_named(ref.name)
    if pod is None or pod.metadata.uid != ref.uid:
        return _refused(
            "UnknownPod",
            f"pod {ref.name} (uid {ref.uid}), for which {where} is reserved, is not in the "
            "clique allocator's view (yet); retriable",
        )
    template = _template_of(pod, claim)
    if not template or not _controlled_by(claim, pod.metadata.uid):
        return _refused(
            "NotFromTemplate",
            f"{where} was not made from a ResourceClaimTemplate for pod {ref.name}: a cdo "
            "attachment device goes only to the claim a ComputeDomain's template made for a "
            "pod the clique allocator pinned",
        )
    domains = domains_using(template)
    if not domains:
        return _refused(
            "NotADomain",
            f"{where} comes from ResourceClaimTemplate {template}, which is no ComputeDomain's "
            f"in namespace {claim.metadata.namespace}",
        )
    taken = sum(1 for c in pod.spec.resource_claims if c.resource_claim_template_name == template)
    if taken > 1:
        return _refused(
            "SeveralClaims",
            f"pod {ref.name} takes {taken} claims of ResourceClaimTemplate {template}: a pod "
            "holds one cdo attachment device",
        )
    nodes = sorted({pool for pool, _ in cdo_devices(claim)})
    refusal: Verdict | None = None
    for domain in domains:
        verdict = _seated(pod, domain, placement_of(domain.metadata.name), nodes=nodes, where=where)
        if verdict.allowed:
            return verdict
        refusal = refusal or verdict
    assert refusal is not None
    return refusal


def _seated(
    pod: Pod,
    domain: ComputeDomain,
    placement: Placement | None,
    *,
    nodes: Sequence[str],
    where: str,
) -> Verdict:
    """Whether ``placement`` (of ``domain``) seats ``pod`` on the one node of ``nodes``."""
    named = f"ComputeDomain {domain.metadata.namespace}/{domain.metadata.name}"
    name = pod.metadata.name
    if placement is None:
        return _refused(
            "NotPlaced",
            f"{named} has no Placement yet, so pod {name} is no member of it and {where} gets no "
            "cdo attachment device; retriable: the allocator writes it before it pins the pods",
        )
    if not placement.spec.multi_node_nvlink:
        return ALLOWED
    seats = [s for s in placement.spec.seats_of(name) if s.pod.uid == pod.metadata.uid]
    if not seats:
        return _refused(
            "NotPinned",
            f"pod {name} (uid {pod.metadata.uid}) is not a member the clique allocator pinned "
            f"for {named}, so {where} gets no cdo attachment device",
        )
    if list(nodes) != [seats[0].node]:
        return _refused(
            "NotPinned",
            f"pod {name} is pinned to node {seats[0].node} for {named}; {where} may not hold a "
            f"cdo attachment device on {', '.join(nodes)}",
        )
    return ALLOWED
