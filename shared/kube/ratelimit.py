"""How long a failed key waits before its next attempt.

Two limits apply together and the longer delay wins:

- :class:`ExponentialBackoff`, per key: ``base * 2**failures``, capped, so one broken object
  backs off quickly without slowing others; ``forget`` (after a success) starts it over;
- :class:`TokenBucket`, for all keys: retries spend tokens refilled at a steady rate, so a
  burst of failures (the API server down) cannot turn into a retry storm against it.

Plain adds (an object changed) are never rate-limited; only retries after a failure are.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Annotated

from msgspec import Meta

from shared.kube.clock import Clock
from shared.settings import Settings

# Beyond 2**62 the delay is at the cap anyway; stopping there keeps the float finite.
_MAX_EXPONENT = 62


class RateLimitSettings(Settings, frozen=True, kw_only=True):
    """Retry pacing of one work queue."""

    backoff_base_s: Annotated[
        float, Meta(description="Delay before the first retry of a key.", gt=0)
    ] = 0.005
    backoff_max_s: Annotated[
        float, Meta(description="Longest delay between retries of one key.", gt=0)
    ] = 300.0
    retries_per_s: Annotated[
        float, Meta(description="Sustained retries per second over all keys.", gt=0)
    ] = 10.0
    retry_burst: Annotated[
        int, Meta(description="Retries over all keys allowed at once before pacing.", ge=1)
    ] = 100


class ExponentialBackoff:
    """Per-key delay that doubles with each consecutive failure, up to a cap."""

    def __init__(self, *, base_s: float, max_s: float) -> None:
        if base_s <= 0 or max_s < base_s:
            raise ValueError(f"need 0 < base_s <= max_s, got base_s={base_s} max_s={max_s}")
        self._base_s = base_s
        self._max_s = max_s
        self._failures: dict[Hashable, int] = {}

    def delay(self, key: Hashable) -> float:
        """Record one more failure of ``key`` and return how long it waits."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        return min(self._base_s * 2.0 ** min(failures, _MAX_EXPONENT), self._max_s)

    def failures(self, key: Hashable) -> int:
        return self._failures.get(key, 0)

    def forget(self, key: Hashable) -> None:
        self._failures.pop(key, None)


class TokenBucket:
    """A shared budget of retries: ``burst`` at once, then ``rate_per_s``.

    Each call reserves a token even when none is left; the returned delay is when that token
    will exist. Reserving ahead (rather than refusing) keeps retries in arrival order.
    """

    def __init__(self, *, rate_per_s: float, burst: int, clock: Clock) -> None:
        if rate_per_s <= 0 or burst < 1:
            raise ValueError(f"need rate_per_s > 0 and burst >= 1, got {rate_per_s}, {burst}")
        self._rate_per_s = rate_per_s
        self._burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._updated = clock.now()

    def reserve(self) -> float:
        """Take one token; return seconds until it is actually available (0: now)."""
        now = self._clock.now()
        elapsed = max(0.0, now - self._updated)
        self._tokens = min(float(self._burst), self._tokens + elapsed * self._rate_per_s)
        self._updated = now
        self._tokens -= 1.0
        if self._tokens >= 0:
            return 0.0
        return -self._tokens / self._rate_per_s


class RetryRateLimiter:
    """The longer of a key's exponential backoff and the shared token bucket's delay."""

    def __init__(self, settings: RateLimitSettings, *, clock: Clock) -> None:
        self._backoff = ExponentialBackoff(
            base_s=settings.backoff_base_s, max_s=settings.backoff_max_s
        )
        self._bucket = TokenBucket(
            rate_per_s=settings.retries_per_s, burst=settings.retry_burst, clock=clock
        )

    def delay(self, key: Hashable) -> float:
        """Record a failure of ``key`` and return how long its retry waits."""
        # Every failure spends a token, also one whose key then waits out a longer backoff:
        # counting all of them is what bounds the retry rate when many keys fail at once.
        backoff = self._backoff.delay(key)
        return max(backoff, self._bucket.reserve())

    def failures(self, key: Hashable) -> int:
        return self._backoff.failures(key)

    def forget(self, key: Hashable) -> None:
        self._backoff.forget(key)
