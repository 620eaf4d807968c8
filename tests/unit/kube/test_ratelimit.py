"""Retry pacing: per-key exponential backoff and the shared token bucket."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.kube import ManualClock, RateLimitSettings
from shared.kube.ratelimit import ExponentialBackoff, RetryRateLimiter, TokenBucket


@given(
    base_ms=st.integers(1, 1000),
    cap_factor=st.integers(1, 10_000),
    failures=st.integers(1, 200),
)
def test_backoff_doubles_per_failure_and_never_passes_the_cap(
    base_ms: int, cap_factor: int, failures: int
) -> None:
    base_s, max_s = base_ms / 1000, base_ms * cap_factor / 1000
    backoff = ExponentialBackoff(base_s=base_s, max_s=max_s)
    delays = [backoff.delay("k") for _ in range(failures)]
    assert delays == [min(base_s * 2.0**n, max_s) for n in range(failures)]
    assert backoff.failures("k") == failures
    backoff.forget("k")
    assert backoff.failures("k") == 0
    assert backoff.delay("k") == base_s


def test_backoff_survives_very_many_failures() -> None:
    backoff = ExponentialBackoff(base_s=0.005, max_s=300)
    for _ in range(5000):
        delay = backoff.delay("k")
    assert delay == 300


@pytest.mark.parametrize(
    ("base_s", "max_s"), [(0, 1), (-1, 1), (2, 1)], ids=["zero", "negative", "cap-below-base"]
)
def test_backoff_refuses_nonsense(base_s: float, max_s: float) -> None:
    with pytest.raises(ValueError, match="base_s"):
        ExponentialBackoff(base_s=base_s, max_s=max_s)


@pytest.mark.parametrize(
    ("rate", "burst", "calls_at", "expected"),
    [
        # burst 3 at t=0, then one token per 0.5 s, reserved in arrival order
        (2.0, 3, [0, 0, 0, 0, 0], [0, 0, 0, 0.5, 1.0]),
        # tokens come back with time
        (2.0, 1, [0, 0.5, 1.0, 1.0], [0, 0, 0, 0.5]),
        # idle time refills to the burst, never beyond
        (1.0, 2, [0, 0, 100, 100, 100], [0, 0, 0, 0, 1.0]),
    ],
)
def test_token_bucket_delays(
    rate: float, burst: int, calls_at: list[float], expected: list[float]
) -> None:
    clock = ManualClock()
    bucket = TokenBucket(rate_per_s=rate, burst=burst, clock=clock)
    delays = []
    for when in calls_at:
        clock.advance_to(when)
        delays.append(bucket.reserve())
    assert delays == pytest.approx(expected)


def test_retry_delay_is_the_longer_of_backoff_and_budget() -> None:
    clock = ManualClock()
    limiter = RetryRateLimiter(
        RateLimitSettings(backoff_base_s=1.0, backoff_max_s=100, retries_per_s=0.1, retry_burst=1),
        clock=clock,
    )
    assert limiter.delay("a") == 1.0  # a token is free; backoff decides
    assert limiter.delay("b") == pytest.approx(10.0)  # the budget is spent; it decides
    assert limiter.failures("a") == limiter.failures("b") == 1
