"""The token bucket that bounds fault events during a storm."""

from __future__ import annotations

import pytest

from services.health_monitor.ratelimit import TokenBucket


def test_a_burst_passes_then_the_rate_limits() -> None:
    bucket = TokenBucket(capacity=3, rate_per_s=1.0, now=0.0)
    assert [bucket.take(0.0) for _ in range(5)] == [True, True, True, False, False]
    assert bucket.take(0.5) is False
    assert bucket.take(1.0) is True
    assert bucket.take(1.0) is False


def test_tokens_never_exceed_the_capacity() -> None:
    bucket = TokenBucket(capacity=2, rate_per_s=10.0, now=0.0)
    assert bucket.tokens(100.0) == 2.0


def test_a_storm_gets_at_most_burst_plus_rate_times_duration() -> None:
    bucket = TokenBucket(capacity=10, rate_per_s=0.2, now=0.0)
    passed = sum(bucket.take(i * 0.01) for i in range(1000))  # 100 events/s for 10 s
    assert 10 < passed <= 10 + 0.2 * 10


def test_time_going_backwards_adds_nothing() -> None:
    bucket = TokenBucket(capacity=1, rate_per_s=1.0, now=10.0)
    assert bucket.take(10.0) is True
    assert bucket.take(5.0) is False


@pytest.mark.parametrize(("capacity", "rate"), [(0, 1.0), (1, -1.0)])
def test_invalid_buckets_are_refused(capacity: int, rate: float) -> None:
    with pytest.raises(ValueError, match=r"token bucket|refill rate"):
        TokenBucket(capacity=capacity, rate_per_s=rate, now=0.0)
