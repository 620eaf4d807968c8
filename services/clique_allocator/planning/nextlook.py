"""When a domain is reconciled again after a plan was applied: the pure decision."""

from __future__ import annotations

from services.clique_allocator.planning.outcome import Plan

UNKNOWN_SIZE_RETRY_S = 1.0
"""A gang whose size cannot be told yet is looked at again this soon."""
EVICTION_RETRY_S = 5.0
"""A refused eviction (a disruption budget) is tried again after this long."""


def next_look_s(
    plan: Plan,
    *,
    woken: bool,
    evictions_refused: bool,
    retry_waiting_s: float,
    resync_s: float,
) -> float | None:
    """Seconds until the domain is reconciled again (0: at once), None when nothing needs it.

    ``woken``: capacity may have grown while the plan was decided. The wake-up queued only the
    domains already waiting, so a domain that has just decided to wait would otherwise sleep
    until its periodic retry (``retry_waiting_s``) with room that may fit it."""
    if plan.unknown_size:
        return UNKNOWN_SIZE_RETRY_S
    if evictions_refused:
        return EVICTION_RETRY_S
    if plan.waiting and woken:
        return 0.0
    if plan.retry_after_s is not None:
        return plan.retry_after_s
    if plan.waiting and retry_waiting_s > 0:
        return retry_waiting_s
    return resync_s if resync_s > 0 else None
