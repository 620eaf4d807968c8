"""The reconcile loop: workers take keys from a work queue and reconcile them one at a time.

A reconcile gets only the key, reads current state, converges it, and says how it went:

- it returns ``Result()``: done; the key's backoff is forgotten;
- it returns ``Result(requeue_after=s)``: done for now, look again in ``s`` seconds (backoff
  forgotten; for state that changes without an event, like a deadline);
- it raises :class:`~shared.errors.TerminalError`: retrying cannot help; the reconciler has
  recorded why (a condition), the runner logs and counts it and does not retry;
- it raises anything else, or overruns ``reconcile_timeout_s``: retried with backoff; when the
  failure is the API server's 429 or 503 with ``Retry-After`` (a KubeApiError, raised or among
  those of a task group), the retry waits at least that long.

Run it as a supervised root task, and drain it when shutdown begins::

    supervisor.start("domains", runner.run())
    supervisor.on_shutdown("drain domains", runner.drain, phase="intake")

``drain`` lets reconciles in flight finish, after which ``run`` returns. Cancelling ``run``
instead interrupts them; an interrupted key is added again, so a queue that lives on retries it.
``run`` leaves no task behind either way.

Metrics are controller-runtime's (``controller_runtime_reconcile_total{controller,result}``,
``..._reconcile_errors_total``, ``..._terminal_reconcile_errors_total``,
``..._reconcile_time_seconds``, ``..._active_workers``, ``..._max_concurrent_reconciles``),
labelled with the runner's name.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Hashable, Iterator
from typing import Annotated, Generic, Literal, TypeVar, get_args

import msgspec
from msgspec import Meta

from shared.errors import QueueShutDownError, TerminalError
from shared.kube.errors import KubeApiError
from shared.kube.workqueue import WorkQueue
from shared.metrics import Metrics
from shared.settings import Settings

K = TypeVar("K", bound=Hashable)

Outcome = Literal["success", "requeue_after", "error", "terminal"]
"""How one reconcile went; controller-runtime's result label, plus ``terminal``."""

log = logging.getLogger("cdo.kube.reconcile")


class Result(msgspec.Struct, frozen=True, kw_only=True):
    """How a reconcile that did not raise went; ``Result()`` means converged."""

    requeue_after: float | None = None

    def __post_init__(self) -> None:
        if self.requeue_after is not None and self.requeue_after < 0:
            raise ValueError(f"requeue_after must be >= 0, got {self.requeue_after}")


Reconcile = Callable[[K], Awaitable[Result]]


class RunnerSettings(Settings, frozen=True, kw_only=True):
    """Concurrency and limits of one reconcile loop."""

    workers: Annotated[
        int, Meta(description="Keys reconciled concurrently (never the same key twice).", ge=1)
    ] = 4
    reconcile_timeout_s: Annotated[
        float,
        Meta(description="Longest one reconcile may run before it counts as failed.", gt=0),
    ] = 60.0


THROTTLED = (429, 503)
"""The answers whose ``Retry-After`` a retry honours (too many requests, unavailable)."""


def retry_after_s(exc: BaseException) -> float:
    """The longest ``Retry-After`` of a 429 or 503 answer in ``exc`` (a group's members and
    causes included); 0 when there is none."""
    if isinstance(exc, KubeApiError) and exc.code in THROTTLED:
        return exc.retry_after_s
    inner: list[BaseException] = []
    if isinstance(exc, BaseExceptionGroup):
        inner.extend(exc.exceptions)
    if exc.__cause__ is not None:
        inner.append(exc.__cause__)
    return max((retry_after_s(one) for one in inner), default=0.0)


def is_terminal(exc: BaseException) -> bool:
    """TerminalError, or a group (from a task group in the reconciler) of nothing else."""
    if isinstance(exc, TerminalError):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(is_terminal(inner) for inner in exc.exceptions)
    return False


class ReconcileRunner(Generic[K]):
    """N workers reconciling keys from one queue; see the module docstring for the rules."""

    def __init__(
        self,
        *,
        name: str,
        queue: WorkQueue[K],
        reconcile: Reconcile[K],
        metrics: Metrics,
        settings: RunnerSettings | None = None,
    ) -> None:
        self.name = name
        self.queue = queue
        self._reconcile = reconcile
        self._settings = settings or RunnerSettings()
        self._instruments = _Instruments(metrics, controller=name, workers=self._settings.workers)

    async def run(self) -> None:
        """Reconcile until the queue shuts down; cancelling it stops every worker."""
        async with asyncio.TaskGroup() as workers:
            for index in range(self._settings.workers):
                workers.create_task(self._work(), name=f"{self.name} worker {index}")

    async def drain(self) -> None:
        """Shut the queue down and wait for reconciles in flight to finish."""
        await self.queue.shut_down_with_drain()

    async def _work(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except QueueShutDownError:
                return
            try:
                with self._instruments.working():
                    await self._reconcile_one(key)
            except asyncio.CancelledError:
                # Interrupted halfway: the object may be half converged, so it needs a look.
                self.queue.add(key)
                raise
            finally:
                self.queue.done(key)

    async def _reconcile_one(self, key: K) -> None:
        clock = self.queue.clock
        started = clock.now()
        outcome = self._outcome(key, await self._attempt(key))
        self._instruments.reconciled(outcome, clock.now() - started)

    async def _attempt(self, key: K) -> Result | BaseException:
        """The reconcile's result, or the exception that counts as its failure."""
        limit_s = self._settings.reconcile_timeout_s
        deadline = asyncio.timeout(limit_s)
        try:
            async with deadline:
                return await self._reconcile(key)
        except TimeoutError as exc:
            if deadline.expired():
                return TimeoutError(f"reconcile overran its {limit_s} s timeout")
            return exc
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            # Awaiting something that was cancelled is the reconcile's failure; letting it
            # through would end this worker quietly.
            return RuntimeError("reconcile raised CancelledError without being cancelled")
        except Exception as exc:
            return exc

    def _outcome(self, key: K, result: Result | BaseException) -> Outcome:
        if isinstance(result, Result):
            self.queue.forget(key)
            if result.requeue_after is None:
                return "success"
            self.queue.add_after(key, result.requeue_after)
            return "requeue_after"
        if is_terminal(result):
            self.queue.forget(key)
            log.error(
                "reconcile failed for good; not retrying",
                extra={
                    "controller": self.name,
                    "key": str(key),
                    "reason": getattr(result, "reason", type(result).__name__),
                    "error": _describe(result),
                },
            )
            return "terminal"
        retries = self.queue.retries(key)
        self.queue.add_rate_limited(key, at_least_s=retry_after_s(result))
        log.warning(
            "reconcile failed; retrying with backoff",
            extra={
                "controller": self.name,
                "key": str(key),
                "retries": retries,
                "error": _describe(result),
            },
            # The first failure in a row carries the traceback; repeats would only add noise.
            exc_info=result if retries == 0 else None,
        )
        return "error"


_RESULT_LABEL = {"terminal": "error"}


class _Instruments:
    """A loop's metrics, as controller-runtime keeps them: every series exists from the start
    (at 0), so a rate or an alert sees the first failure; a terminal error counts as an error
    too, and in a counter of its own."""

    def __init__(self, metrics: Metrics, *, controller: str, workers: int) -> None:
        self._results = {
            outcome: metrics.reconciles.labels(controller, _RESULT_LABEL.get(outcome, outcome))
            for outcome in get_args(Outcome)
        }
        self._errors = metrics.reconcile_errors.labels(controller)
        self._terminal = metrics.terminal_reconcile_errors.labels(controller)
        self._seconds = metrics.reconcile_seconds.labels(controller)
        self._active = metrics.active_workers.labels(controller)
        metrics.max_concurrent_reconciles.labels(controller).set(workers)
        self._active.set(0)

    @contextlib.contextmanager
    def working(self) -> Iterator[None]:
        self._active.inc()
        try:
            yield
        finally:
            self._active.dec()

    def reconciled(self, outcome: Outcome, seconds: float) -> None:
        self._results[outcome].inc()
        if outcome in ("error", "terminal"):
            self._errors.inc()
        if outcome == "terminal":
            self._terminal.inc()
        self._seconds.observe(seconds)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
