"""A queue of keys to reconcile, with the guarantees a level-triggered controller relies on.

- A key is handed to one worker at a time: while it is being processed, ``get`` skips it.
- Adds coalesce: adding a key that is already waiting does nothing; adding a key that is being
  processed marks it to run once more after ``done``, however many adds arrived meanwhile.
  No add is lost: after ``add(key)``, the key is processed at least once starting after the add.
- ``add_after`` holds a key back for a while (one timer for the whole queue, not one per key);
  a key held back twice keeps the earlier time.
- ``add_rate_limited`` retries after a failure, delayed by the per-key backoff and the shared
  retry budget (see :mod:`shared.kube.ratelimit`), and no sooner than ``at_least_s`` (the API
  server's ``Retry-After``); ``forget`` resets the key's backoff.
- ``shut_down`` refuses further adds, drops what waits or is held back, and makes ``get`` raise
  :class:`~shared.errors.QueueShutDownError`; keys in flight may finish and ``done`` still works.
  Dropping is safe because the queue holds only keys, never state: a restarted (or newly
  elected) controller lists everything again.

Everything except ``get`` and ``shut_down_with_drain`` is synchronous, so an informer's event
handler can add keys directly. All methods must be called from the event loop's thread.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from shared.errors import QueueShutDownError
from shared.kube.clock import Clock, MonotonicClock, Timer
from shared.kube.ratelimit import RateLimitSettings, RetryRateLimiter
from shared.metrics import Metrics

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    """Keys waiting for a worker; see the module docstring for the rules."""

    def __init__(
        self,
        *,
        name: str,
        metrics: Metrics | None = None,
        clock: Clock | None = None,
        rate_limit: RateLimitSettings | None = None,
    ) -> None:
        self.name = name
        self.clock: Clock = clock or MonotonicClock()
        self._limiter = RetryRateLimiter(rate_limit or RateLimitSettings(), clock=self.clock)
        self._ready: deque[K] = deque()
        # Keys that need a run: waiting in _ready, or in flight and to be run again after done.
        self._dirty: set[K] = set()
        self._processing: dict[K, float] = {}  # key -> when a worker took it
        self._ready_since: dict[K, float] = {}
        self._getters: deque[asyncio.Future[None]] = deque()
        self._held: dict[K, float] = {}  # key -> when it becomes ready
        self._held_heap: list[tuple[float, int, K]] = []
        self._held_order = itertools.count()
        self._timer: Timer | None = None
        self._timer_at = 0.0
        self._shutting_down = False
        self._drained = asyncio.Event()
        self._instruments = _Instruments(
            metrics or Metrics(), queue=name, depth=self.__len__, running=self._running_seconds
        )

    # -- state ---------------------------------------------------------------------------------

    def __len__(self) -> int:
        """Keys ready and waiting for a worker."""
        return len(self._ready)

    @property
    def in_flight(self) -> int:
        """Keys a worker is processing now."""
        return len(self._processing)

    @property
    def held(self) -> int:
        """Keys held back by ``add_after`` or a rate-limited retry."""
        return len(self._held)

    @property
    def is_shutting_down(self) -> bool:
        return self._shutting_down

    def is_in_flight(self, key: K) -> bool:
        return key in self._processing

    def retries(self, key: K) -> int:
        """Consecutive rate-limited retries of ``key`` since it was last forgotten."""
        return self._limiter.failures(key)

    # -- adding --------------------------------------------------------------------------------

    def add(self, key: K) -> None:
        """Make ``key`` due now (coalescing with a pending run of the same key)."""
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        self._instruments.added()
        if key in self._processing:
            return  # done() puts it back, so it never runs on two workers at once
        self._make_ready(key)

    def add_after(self, key: K, delay_s: float) -> None:
        """Add ``key`` once ``delay_s`` seconds have passed (now if ``delay_s <= 0``)."""
        if self._shutting_down:
            return
        if delay_s <= 0:
            self.add(key)
            return
        due = self.clock.now() + delay_s
        current = self._held.get(key)
        if current is not None and current <= due:
            return
        self._held[key] = due
        # An earlier entry for the key stays in the heap; _release skips it as stale.
        heapq.heappush(self._held_heap, (due, next(self._held_order), key))
        self._arm_timer()

    def add_rate_limited(self, key: K, *, at_least_s: float = 0.0) -> None:
        """Add ``key`` again after a failure, once its backoff and the retry budget allow, and
        no sooner than ``at_least_s`` (what the server asked for with ``Retry-After``)."""
        if self._shutting_down:
            return
        self._instruments.retried()
        self.add_after(key, max(self._limiter.delay(key), at_least_s))

    def forget(self, key: K) -> None:
        """Reset ``key``'s backoff: its next failure waits the shortest delay again."""
        self._limiter.forget(key)

    # -- taking --------------------------------------------------------------------------------

    async def get(self) -> K:
        """Wait for a ready key and mark it in flight; the caller must call ``done(key)``.

        Raises QueueShutDownError once the queue is shut down.
        """
        while not self._ready:
            if self._shutting_down:
                raise QueueShutDownError(f"work queue {self.name} is shut down")
            waiter = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except BaseException:
                waiter.cancel()
                if waiter in self._getters:
                    self._getters.remove(waiter)
                # A wake-up meant for this getter must not be lost with it.
                if self._ready and not waiter.cancelled():
                    self._wake_one()
                raise
        # Shutting down empties _ready and add refuses keys, so a key here is fair to hand out.
        key = self._ready.popleft()
        self._dirty.discard(key)
        now = self.clock.now()
        self._instruments.waited(now - self._ready_since.pop(key, now))
        self._processing[key] = now
        return key

    def done(self, key: K) -> None:
        """Mark ``key`` finished; if it was added meanwhile, it becomes ready again."""
        started = self._processing.pop(key, None)
        if started is None:
            raise ValueError(f"work queue {self.name}: done({key!r}) for a key not in flight")
        self._instruments.worked(self.clock.now() - started)
        if self._shutting_down:
            if not self._processing:
                self._drained.set()
            return
        if key in self._dirty:
            self._make_ready(key)

    # -- stopping ------------------------------------------------------------------------------

    def shut_down(self) -> None:
        """Stop: refuse adds, drop waiting and held keys, wake every waiting ``get``."""
        if self._shutting_down:
            return
        self._shutting_down = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._held.clear()
        self._held_heap.clear()
        self._ready.clear()
        self._ready_since.clear()
        self._dirty.clear()
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
        if not self._processing:
            self._drained.set()

    async def shut_down_with_drain(self) -> None:
        """Shut down, then wait until every key in flight is done."""
        self.shut_down()
        await self._drained.wait()

    # -- internals -----------------------------------------------------------------------------

    def _running_seconds(self) -> list[float]:
        now = self.clock.now()
        return [now - started for started in self._processing.values()]

    def _make_ready(self, key: K) -> None:
        self._ready.append(key)
        self._ready_since[key] = self.clock.now()
        self._wake_one()

    def _wake_one(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _arm_timer(self) -> None:
        """Point the one timer at the earliest held key."""
        heap = self._held_heap
        while heap and self._held.get(heap[0][2]) != heap[0][0]:
            heapq.heappop(heap)
        if not heap:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            return
        due = heap[0][0]
        if self._timer is not None:
            if self._timer_at <= due:
                return  # it fires first and re-arms for the rest
            self._timer.cancel()
        self._timer = self.clock.call_at(due, self._release)
        self._timer_at = due

    def _release(self) -> None:
        """Timer callback: add every held key that is due."""
        self._timer = None
        now = self.clock.now()
        heap = self._held_heap
        while heap and heap[0][0] <= now:
            due, _, key = heapq.heappop(heap)
            if self._held.get(key) == due:
                del self._held[key]
                self.add(key)
        self._arm_timer()


class _Instruments:
    """A queue's metrics, bound to its label once rather than looked up on every call."""

    def __init__(
        self,
        metrics: Metrics,
        *,
        queue: str,
        depth: Callable[[], int],
        running: Callable[[], list[float]],
    ) -> None:
        self._adds = metrics.workqueue_adds.labels(queue)
        self._retries = metrics.workqueue_retries.labels(queue)
        self._queue_seconds = metrics.workqueue_queue_seconds.labels(queue)
        self._work_seconds = metrics.workqueue_work_seconds.labels(queue)
        # Gauges are computed when scraped, so keeping them current costs nothing per key.
        metrics.workqueue_depth.labels(queue).set_function(depth)
        metrics.workqueue_unfinished_work_seconds.labels(queue).set_function(lambda: sum(running()))
        metrics.workqueue_longest_running_seconds.labels(queue).set_function(
            lambda: max(running(), default=0.0)
        )

    def added(self) -> None:
        self._adds.inc()

    def retried(self) -> None:
        self._retries.inc()

    def waited(self, seconds: float) -> None:
        self._queue_seconds.observe(seconds)

    def worked(self, seconds: float) -> None:
        self._work_seconds.observe(seconds)
