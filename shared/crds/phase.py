"""A ComputeDomain's phase, read back from its status (pure).

The domain controller publishes the phase in membership events; readers that see only the
ComputeDomain (``cdo status``, the demo) derive the same phase from the status the same way:
Deleting, Pending (not placed), Degraded, Ready, else Placed.
"""

from __future__ import annotations

from shared.crds.computedomain import ComputeDomain


def domain_phase(domain: ComputeDomain) -> tuple[str, str]:
    """The phase and its reason, as the domain controller derives them from the status."""
    status = domain.status
    if domain.deleting:
        return "Deleting", ""
    placed = status.condition("Placed")
    degraded = status.condition("Degraded")
    ready = status.condition("Ready")
    if placed is None or placed.status != "True":
        return "Pending", placed.reason if placed is not None else ""
    if degraded is not None and degraded.status == "True":
        return "Degraded", degraded.reason
    if status.status == "Ready":
        return "Ready", ""
    return "Placed", ready.reason if ready is not None else ""
