"""Helpers for the controller-core tests."""

from __future__ import annotations

from shared.kube import RateLimitSettings, WorkQueue
from shared.metrics import Metrics

# Backoff that is easy to read in assertions, and a retry budget too large to interfere.
PLAIN_BACKOFF = RateLimitSettings(
    backoff_base_s=1.0, backoff_max_s=60.0, retries_per_s=1000.0, retry_burst=1000
)


def sample(metrics: Metrics, name: str, /, **labels: str) -> float:
    """A metric's current value (0 when it has no sample yet)."""
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


async def take_ready(queue: WorkQueue[str]) -> list[str]:
    """Every key ready now, in hand-out order, each marked done at once."""
    taken: list[str] = []
    while len(queue):
        key = await queue.get()
        queue.done(key)
        taken.append(key)
    return taken
