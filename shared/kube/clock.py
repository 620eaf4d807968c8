"""Time for the work queue: read the clock, schedule one callback.

The queue needs only "what time is it" and "call me at that time", so tests can swap the
monotonic clock for a :class:`ManualClock` and move time forward explicitly: backoff and
``add_after`` then play out exactly and instantly, with no sleeps.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol


class Timer(Protocol):
    """A scheduled callback that can be called off."""

    def cancel(self) -> None: ...


class Clock(Protocol):
    """Seconds on a monotonic scale, and a way to run a callback at a given time."""

    def now(self) -> float: ...

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        """Run ``callback`` (synchronous, in the event loop) once ``now() >= when``."""
        ...


class MonotonicClock:
    """Real time: ``time.monotonic`` and the running event loop's timers."""

    def now(self) -> float:
        return time.monotonic()

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        # call_later on our own scale: the loop's clock need not be time.monotonic (uvloop).
        loop = asyncio.get_running_loop()
        return loop.call_later(max(0.0, when - time.monotonic()), callback)


class _ManualTimer:
    def __init__(self, callback: Callable[[], None]) -> None:
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A clock that only moves when told to; due callbacks run inside :meth:`advance`."""

    def __init__(self, *, start: float = 0.0) -> None:
        self._now = start
        self._timers: list[tuple[float, int, _ManualTimer]] = []
        self._order = itertools.count()

    def now(self) -> float:
        return self._now

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        timer = _ManualTimer(callback)
        heapq.heappush(self._timers, (when, next(self._order), timer))
        return timer

    @property
    def pending(self) -> int:
        """Timers scheduled and not yet run or cancelled."""
        return sum(1 for _, _, timer in self._timers if not timer.cancelled)

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, running due callbacks in time order."""
        if seconds < 0:
            raise ValueError(f"a clock cannot go back ({seconds} s)")
        self.advance_to(self._now + seconds)

    def advance_to(self, when: float) -> None:
        """Move time forward to exactly ``when``, running due callbacks in time order."""
        if when < self._now:
            raise ValueError(f"a clock cannot go back (from {self._now} to {when})")
        while self._timers and self._timers[0][0] <= when:
            due, _, timer = heapq.heappop(self._timers)
            # Each callback sees the time it was due at, as it would with a real clock.
            self._now = max(self._now, due)
            if not timer.cancelled:
                timer.callback()
        self._now = when
