"""Which ResourceClaims a pod uses and whether the kubelet may prepare them: pure decisions.

A pod claim names its ResourceClaim directly (``resourceClaimName``) or through a template; for a
template the resource-claim controller writes the generated claim's name into
``status.resourceClaimStatuses`` (no entry yet: not created yet; an entry without a name: the
pod needs no claim for it). The kubelet prepares a claim only once the scheduler has allocated
it and reserved it for this pod, as the real kubelet insists.
"""

from __future__ import annotations

from shared.kube.models import Pod, ResourceClaim
from shared.kubeletapi import Claim


class ClaimNotUsableError(Exception):
    """The pod's claims cannot be prepared yet; the message says why (shown on the pod)."""


def claim_names(pod: Pod) -> tuple[str, ...]:
    """Names of the ResourceClaims the pod uses, in ``spec.resourceClaims`` order."""
    generated = {
        status.name: status.resource_claim_name for status in pod.status.resource_claim_statuses
    }
    names: list[str] = []
    for pod_claim in pod.spec.resource_claims:
        if pod_claim.resource_claim_name:
            names.append(pod_claim.resource_claim_name)
        elif pod_claim.resource_claim_template_name:
            if pod_claim.name not in generated:
                raise ClaimNotUsableError(
                    f"the ResourceClaim for pod claim {pod_claim.name!r} has not been created yet"
                )
            name = generated[pod_claim.name]
            if name:
                names.append(name)
    return tuple(dict.fromkeys(names))


def check_usable(claim: ResourceClaim, pod: Pod) -> None:
    """Raise ClaimNotUsableError unless ``claim`` is allocated and reserved for ``pod``."""
    meta = claim.metadata
    if claim.status.allocation is None:
        raise ClaimNotUsableError(f"resource claim {meta.namespace}/{meta.name} is not allocated")
    if not any(ref.uid == pod.metadata.uid for ref in claim.status.reserved_for):
        raise ClaimNotUsableError(
            f"pod {pod.metadata.name} is not allowed to use resource claim "
            f"{meta.namespace}/{meta.name}: not reserved for it"
        )


def drivers_of(claim: ResourceClaim) -> tuple[str, ...]:
    """The DRA drivers of the claim's allocated devices, in allocation order, each once."""
    allocation = claim.status.allocation
    if allocation is None:
        return ()
    return tuple(dict.fromkeys(result.driver for result in allocation.devices.results))


def claim_message(claim: ResourceClaim) -> Claim:
    """How the kubelet names the claim to a DRA plugin."""
    meta = claim.metadata
    return Claim(namespace=meta.namespace, uid=meta.uid, name=meta.name)
