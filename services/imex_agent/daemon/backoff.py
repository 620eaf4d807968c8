"""When a daemon that died, or did not start, is started again.

The pause doubles with each quick death or failed start in a row, from
``restart_backoff_initial_s`` up to ``restart_backoff_max_s``, and the count starts over once a
daemon ran for ``stable_after_s``.
"""

from __future__ import annotations


def restart_delay(*, failures: int, initial_s: float, max_s: float) -> float:
    """Seconds before the next start after ``failures`` quick deaths or failed starts in a row
    (pure)."""
    return min(initial_s * 2.0 ** (failures - 1), max_s)


class RestartBackoff:
    """The quick deaths in a row, and when the next start may go."""

    def __init__(self, *, initial_s: float, max_s: float, stable_after_s: float) -> None:
        self._initial_s = initial_s
        self._max_s = max_s
        self._stable_after_s = stable_after_s
        self._failures = 0
        self._next_start = 0.0

    def wait(self, now: float) -> float:
        """Seconds until a start may go (zero or less: now)."""
        return self._next_start - now

    def ran(self, seconds: float) -> None:
        """A daemon exited after running ``seconds``: a long run forgives the deaths before."""
        if seconds >= self._stable_after_s:
            self._failures = 0

    def failed(self, now: float) -> float:
        """Count a death or a failed start at ``now``; the pause before the next start."""
        self._failures += 1
        delay = restart_delay(failures=self._failures, initial_s=self._initial_s, max_s=self._max_s)
        self._next_start = now + delay
        return delay
