"""When a domain is reconciled again: a gang that decided to wait while capacity was freed is
decided again at once, not at its periodic retry."""

from __future__ import annotations

from services.clique_allocator.planning.nextlook import (
    EVICTION_RETRY_S,
    UNKNOWN_SIZE_RETRY_S,
    next_look_s,
)
from services.clique_allocator.planning.outcome import Plan

WAITING = Plan(waiting=True)


def look(
    plan: Plan, *, woken: bool = False, refused: bool = False, resync_s: float = 0.0
) -> float | None:
    return next_look_s(
        plan, woken=woken, evictions_refused=refused, retry_waiting_s=30.0, resync_s=resync_s
    )


def test_a_gang_woken_while_it_decided_to_wait_is_decided_again_at_once() -> None:
    assert look(WAITING, woken=True) == 0.0


def test_a_gang_that_waits_unwoken_sleeps_until_its_periodic_retry() -> None:
    assert look(WAITING) == 30.0


def test_a_wake_means_nothing_to_a_domain_that_does_not_wait() -> None:
    assert look(Plan(), woken=True) is None
    assert look(Plan(), woken=True, resync_s=600.0) == 600.0


def test_an_unknown_size_and_a_refused_eviction_come_first() -> None:
    assert look(Plan(waiting=True, unknown_size=True), woken=True) == UNKNOWN_SIZE_RETRY_S
    assert look(WAITING, woken=True, refused=True) == EVICTION_RETRY_S


def test_a_stuck_slices_grace_is_kept_when_nothing_woke_it() -> None:
    assert look(Plan(waiting=True, retry_after_s=4.0)) == 4.0
    assert look(Plan(waiting=True, retry_after_s=4.0), woken=True) == 0.0
