"""The manual clock runs due callbacks in time order, and only when moved."""

from __future__ import annotations

import pytest

from shared.kube import ManualClock


def test_callbacks_run_in_time_order_and_see_their_own_time() -> None:
    clock = ManualClock(start=10.0)
    seen: list[tuple[str, float]] = []
    clock.call_at(12.0, lambda: seen.append(("late", clock.now())))
    clock.call_at(11.0, lambda: seen.append(("early", clock.now())))
    clock.call_at(11.0, lambda: seen.append(("early-2", clock.now())))
    clock.advance(0.5)
    assert seen == []
    clock.advance(5)
    assert seen == [("early", 11.0), ("early-2", 11.0), ("late", 12.0)]
    assert clock.now() == 15.5


def test_a_cancelled_timer_does_not_run() -> None:
    clock = ManualClock()
    seen: list[str] = []
    timer = clock.call_at(1.0, lambda: seen.append("ran"))
    assert clock.pending == 1
    timer.cancel()
    assert clock.pending == 0
    clock.advance(2)
    assert seen == []


def test_a_callback_may_schedule_another_that_is_already_due() -> None:
    clock = ManualClock()
    seen: list[float] = []

    def first() -> None:
        seen.append(clock.now())
        clock.call_at(1.5, lambda: seen.append(clock.now()))

    clock.call_at(1.0, first)
    clock.advance_to(2.0)
    assert seen == [1.0, 1.5]


def test_time_does_not_go_back() -> None:
    clock = ManualClock(start=5.0)
    with pytest.raises(ValueError, match="back"):
        clock.advance(-1)
    with pytest.raises(ValueError, match="back"):
        clock.advance_to(4.0)
