"""A token bucket for the node's fault events: bursts pass, storms are cut to a steady rate."""

from __future__ import annotations


class TokenBucket:
    """``capacity`` tokens, refilled at ``rate_per_s``; each event takes one.

    Time is passed in (monotonic seconds), so the bucket is deterministic under test.
    """

    __slots__ = ("_capacity", "_rate", "_tokens", "_updated")

    def __init__(self, *, capacity: int, rate_per_s: float, now: float) -> None:
        if capacity < 1:
            raise ValueError(f"a token bucket holds at least one token, not {capacity}")
        if rate_per_s < 0:
            raise ValueError(f"a refill rate is not negative, not {rate_per_s}")
        self._capacity = float(capacity)
        self._rate = rate_per_s
        self._tokens = float(capacity)
        self._updated = now

    def _refill(self, now: float) -> None:
        if now > self._updated:
            self._tokens = min(self._capacity, self._tokens + (now - self._updated) * self._rate)
            self._updated = now

    def tokens(self, now: float) -> float:
        self._refill(now)
        return self._tokens

    def take(self, now: float) -> bool:
        """Take a token if one is there; False means the event should be suppressed."""
        self._refill(now)
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False
