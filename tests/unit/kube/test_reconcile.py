"""The reconcile loop: outcomes, retries, concurrency and stopping, on a manual clock."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable

import pytest

from shared.errors import TerminalError
from shared.kube import ManualClock, ReconcileRunner, Result, RunnerSettings, WorkQueue
from shared.kube.errors import KubeApiError
from shared.kube.reconcile import retry_after_s
from shared.metrics import Metrics
from shared.runtime.supervisor import EXIT_OK, Supervisor
from tests.support.wait import wait_for
from tests.unit.kube.helpers import PLAIN_BACKOFF, sample

# What a scripted reconcile does on one attempt: return, raise, or wait for the event first.
Answer = Result | BaseException | asyncio.Event


class Scripted:
    """A reconcile whose answers per key are given in advance; records what happened."""

    def __init__(self, answers: dict[str, list[Answer]] | None = None) -> None:
        self.answers = {key: list(script) for key, script in (answers or {}).items()}
        self.attempts: Counter[str] = Counter()
        self.running: set[str] = set()
        self.peak = 0
        self.overlaps: list[str] = []
        self.interrupted: list[str] = []

    async def __call__(self, key: str) -> Result:
        self.attempts[key] += 1
        if key in self.running:
            self.overlaps.append(key)
        self.running.add(key)
        self.peak = max(self.peak, len(self.running))
        try:
            script = self.answers.get(key)
            answer = script.pop(0) if script else Result()
            if isinstance(answer, asyncio.Event):
                await answer.wait()
                answer = Result()
            if isinstance(answer, BaseException):
                raise answer
            return answer
        except asyncio.CancelledError:
            self.interrupted.append(key)
            raise
        finally:
            self.running.discard(key)

    def attempted_more_than(self, key: str, count: int) -> Callable[[], bool]:
        return lambda: self.attempts[key] > count

    def idle(self, queue: WorkQueue[str]) -> bool:
        return not self.running and queue.in_flight == 0


def make_runner(
    reconcile: Scripted,
    *,
    clock: ManualClock,
    metrics: Metrics,
    workers: int = 2,
    timeout_s: float = 30.0,
) -> ReconcileRunner[str]:
    queue = WorkQueue[str](name="domains", metrics=metrics, clock=clock, rate_limit=PLAIN_BACKOFF)
    return ReconcileRunner(
        name="domains",
        queue=queue,
        reconcile=reconcile,
        metrics=metrics,
        settings=RunnerSettings(workers=workers, reconcile_timeout_s=timeout_s),
    )


@contextlib.asynccontextmanager
async def running(runner: ReconcileRunner[str]) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(runner.run(), name="runner under test")
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def outcomes(metrics: Metrics) -> dict[str, float]:
    """Reconciles by controller-runtime's result label, and the terminal errors among them."""
    found = {
        result: sample(
            metrics, "controller_runtime_reconcile_total", controller="domains", result=result
        )
        for result in ("success", "requeue_after", "error")
    }
    errors = sample(metrics, "controller_runtime_reconcile_errors_total", controller="domains")
    assert errors == found["error"], "every error result is counted as an error"
    found["terminal"] = sample(
        metrics, "controller_runtime_terminal_reconcile_errors_total", controller="domains"
    )
    return found


async def test_errors_are_retried_with_growing_backoff_until_success(
    clock: ManualClock, metrics: Metrics
) -> None:
    script: list[Answer] = [RuntimeError("conflict")] * 3
    reconcile = Scripted({"a": [*script, Result()]})
    runner = make_runner(reconcile, clock=clock, metrics=metrics)
    queue = runner.queue
    async with running(runner):
        queue.add("a")
        for attempt, backoff_s in enumerate([1.0, 2.0, 4.0], start=1):
            await wait_for(lambda: queue.held == 1 and reconcile.idle(queue), what="retry held")
            assert reconcile.attempts["a"] == attempt
            assert queue.retries("a") == attempt
            failed_at = clock.now()
            clock.advance_to(failed_at + backoff_s * 0.999)
            assert len(queue) == 0 and queue.held == 1, "retried before its backoff"
            clock.advance_to(failed_at + backoff_s)
            await wait_for(reconcile.attempted_more_than("a", attempt), what="retry ran")
        await wait_for(lambda: reconcile.idle(queue), what="success")

    assert reconcile.attempts["a"] == 4
    assert queue.retries("a") == 0, "success forgets the backoff"
    assert queue.held == 0
    assert outcomes(metrics) == {"success": 1, "requeue_after": 0, "error": 3, "terminal": 0}
    assert (
        sample(metrics, "controller_runtime_reconcile_time_seconds_count", controller="domains")
        == 4
    )


def throttled(code: int, seconds: float) -> KubeApiError:
    return KubeApiError(code=code, reason="Throttled", message="later", retry_after_s=seconds)


@pytest.mark.parametrize(
    "error",
    [
        throttled(429, 7),
        throttled(503, 7),
        ExceptionGroup("in a task group", [RuntimeError("x"), throttled(429, 7)]),
        RuntimeError("wrapped"),
    ],
    ids=["429", "503", "in-a-group", "as-a-cause"],
)
async def test_a_throttled_failure_is_retried_no_sooner_than_its_retry_after(
    clock: ManualClock, metrics: Metrics, error: BaseException
) -> None:
    if isinstance(error, RuntimeError):
        error.__cause__ = throttled(429, 7)
    reconcile = Scripted({"a": [error, Result()]})
    runner = make_runner(reconcile, clock=clock, metrics=metrics)
    queue = runner.queue
    async with running(runner):
        queue.add("a")
        await wait_for(lambda: queue.held == 1 and reconcile.idle(queue), what="retry held")
        failed_at = clock.now()
        clock.advance_to(failed_at + 6.99)  # the backoff alone would be 1 s
        assert len(queue) == 0 and queue.held == 1, "retried before Retry-After"
        clock.advance_to(failed_at + 7)
        await wait_for(reconcile.attempted_more_than("a", 1), what="retry ran")
        await wait_for(lambda: reconcile.idle(queue), what="success")


@pytest.mark.parametrize("code", [409, 500])
def test_only_429_and_503_ask_for_a_pause(code: int) -> None:
    assert retry_after_s(throttled(code, 7)) == 0
    assert retry_after_s(throttled(429, 7)) == 7


@pytest.mark.parametrize(
    "error",
    [
        TerminalError("template name belongs to another domain", reason="TemplateNameClash"),
        ExceptionGroup("several", [TerminalError("x"), TerminalError("y")]),
    ],
    ids=["terminal", "group-of-terminal"],
)
async def test_a_terminal_error_is_not_retried(
    clock: ManualClock,
    metrics: Metrics,
    caplog: pytest.LogCaptureFixture,
    error: Exception,
) -> None:
    reconcile = Scripted({"a": [error]})
    runner = make_runner(reconcile, clock=clock, metrics=metrics)
    queue = runner.queue
    with caplog.at_level(logging.ERROR, logger="cdo.kube.reconcile"):
        async with running(runner):
            queue.add("a")
            await wait_for(lambda: reconcile.attempts["a"] == 1 and reconcile.idle(queue))
            clock.advance(10_000)
            assert len(queue) == 0 and queue.held == 0, "a terminal error must not be retried"
            assert queue.retries("a") == 0

            queue.add("a")  # a later change of the object looks again
            await wait_for(lambda: reconcile.attempts["a"] == 2 and reconcile.idle(queue))

    assert outcomes(metrics) == {"success": 1, "requeue_after": 0, "error": 1, "terminal": 1}
    assert any(getattr(r, "key", None) == "a" for r in caplog.records)


async def test_a_mixed_exception_group_is_an_ordinary_error(
    clock: ManualClock, metrics: Metrics
) -> None:
    reconcile = Scripted({"a": [ExceptionGroup("mixed", [TerminalError("x"), OSError("y")])]})
    runner = make_runner(reconcile, clock=clock, metrics=metrics)
    async with running(runner):
        runner.queue.add("a")
        await wait_for(lambda: runner.queue.held == 1 and reconcile.idle(runner.queue))
    assert outcomes(metrics)["error"] == 1


async def test_requeue_after_looks_again_at_that_time(clock: ManualClock, metrics: Metrics) -> None:
    reconcile = Scripted({"a": [Result(requeue_after=30.0), Result()]})
    runner = make_runner(reconcile, clock=clock, metrics=metrics)
    queue = runner.queue
    async with running(runner):
        queue.add("a")
        await wait_for(lambda: queue.held == 1 and reconcile.idle(queue), what="requeue held")
        clock.advance(29.9)
        assert len(queue) == 0 and reconcile.attempts["a"] == 1
        clock.advance(0.1)
        await wait_for(lambda: reconcile.attempts["a"] == 2 and reconcile.idle(queue))
    assert queue.held == 0
    assert outcomes(metrics) == {"success": 1, "requeue_after": 1, "error": 0, "terminal": 0}


async def test_requeue_after_zero_looks_again_at_once(clock: ManualClock, metrics: Metrics) -> None:
    reconcile = Scripted({"a": [Result(requeue_after=0)]})
    runner = make_runner(reconcile, clock=clock, metrics=metrics)
    async with running(runner):
        runner.queue.add("a")
        await wait_for(lambda: reconcile.attempts["a"] == 2 and reconcile.idle(runner.queue))


def test_negative_requeue_after_is_refused() -> None:
    with pytest.raises(ValueError, match="requeue_after"):
        Result(requeue_after=-1)


async def test_workers_reconcile_different_keys_concurrently(
    clock: ManualClock, metrics: Metrics
) -> None:
    gates = {key: asyncio.Event() for key in "abcd"}
    reconcile = Scripted({key: [gate] for key, gate in gates.items()})
    runner = make_runner(reconcile, clock=clock, metrics=metrics, workers=3)
    queue = runner.queue
    async with running(runner):
        for key in "abcd":
            queue.add(key)
        await wait_for(lambda: len(reconcile.running) == 3, what="three keys in flight")
        assert len(queue) == 1, "the fourth key waits for a free worker"
        for gate in gates.values():
            gate.set()
        await wait_for(lambda: sum(reconcile.attempts.values()) == 4 and reconcile.idle(queue))
    assert reconcile.peak == 3


async def test_a_key_added_while_reconciling_runs_again_after_never_alongside(
    clock: ManualClock, metrics: Metrics
) -> None:
    gate = asyncio.Event()
    reconcile = Scripted({"a": [gate]})
    runner = make_runner(reconcile, clock=clock, metrics=metrics, workers=4)
    queue = runner.queue
    async with running(runner):
        queue.add("a")
        await wait_for(lambda: "a" in reconcile.running)
        for _ in range(3):
            queue.add("a")
        assert len(queue) == 0
        gate.set()
        await wait_for(lambda: reconcile.attempts["a"] == 2 and reconcile.idle(queue))
    assert reconcile.overlaps == []


async def test_a_reconcile_that_overruns_its_timeout_is_retried(
    clock: ManualClock, metrics: Metrics
) -> None:
    never = asyncio.Event()
    reconcile = Scripted({"a": [never, Result()]})
    runner = make_runner(reconcile, clock=clock, metrics=metrics, timeout_s=0.05)
    queue = runner.queue
    async with running(runner):
        queue.add("a")
        await wait_for(lambda: queue.held == 1 and reconcile.idle(queue), what="timed out")
        clock.advance(1.0)
        await wait_for(lambda: reconcile.attempts["a"] == 2 and reconcile.idle(queue))
    assert outcomes(metrics) == {"success": 1, "requeue_after": 0, "error": 1, "terminal": 0}


async def test_a_stray_cancelled_error_counts_as_failure_and_keeps_the_worker(
    clock: ManualClock, metrics: Metrics
) -> None:
    reconcile = Scripted({"a": [asyncio.CancelledError()]})
    runner = make_runner(reconcile, clock=clock, metrics=metrics, workers=1)
    queue = runner.queue
    async with running(runner):
        queue.add("a")
        await wait_for(lambda: queue.held == 1 and reconcile.idle(queue))
        queue.add("b")
        await wait_for(lambda: reconcile.attempts["b"] == 1 and reconcile.idle(queue))
    assert outcomes(metrics) == {"success": 1, "requeue_after": 0, "error": 1, "terminal": 0}


async def test_cancelling_run_interrupts_reconciles_and_leaves_no_task(
    clock: ManualClock, metrics: Metrics
) -> None:
    before = asyncio.all_tasks()
    reconcile = Scripted({"a": [asyncio.Event()]})
    runner = make_runner(reconcile, clock=clock, metrics=metrics, workers=3)
    task = asyncio.create_task(runner.run())
    runner.queue.add("a")
    await wait_for(lambda: "a" in reconcile.running)

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert asyncio.all_tasks() == before
    assert reconcile.interrupted == ["a"]
    assert runner.queue.in_flight == 0
    assert len(runner.queue) == 1, "the interrupted key is queued again"
    assert outcomes(metrics) == {"success": 0, "requeue_after": 0, "error": 0, "terminal": 0}


async def test_drain_lets_reconciles_in_flight_finish_and_run_return(
    clock: ManualClock, metrics: Metrics
) -> None:
    gate = asyncio.Event()
    reconcile = Scripted({"a": [gate]})
    runner = make_runner(reconcile, clock=clock, metrics=metrics)
    task = asyncio.create_task(runner.run())
    runner.queue.add("a")
    runner.queue.add("b")
    await wait_for(lambda: "a" in reconcile.running and reconcile.attempts["b"] == 1)

    drain = asyncio.create_task(runner.drain())
    await wait_for(lambda: runner.queue.is_shutting_down)
    runner.queue.add("c")  # refused: the queue is shutting down
    assert not drain.done()
    gate.set()
    await asyncio.wait_for(drain, 5)
    await asyncio.wait_for(task, 5)
    assert reconcile.interrupted == []
    assert reconcile.attempts == Counter({"a": 1, "b": 1})


async def test_runs_under_the_supervisor_and_drains_on_stop(
    clock: ManualClock, metrics: Metrics
) -> None:
    gate = asyncio.Event()
    reconcile = Scripted({"a": [gate]})
    runner = make_runner(reconcile, clock=clock, metrics=metrics)
    supervisor = Supervisor(step_timeout_s=5)
    supervisor.start("domains", runner.run())
    supervisor.on_shutdown("drain domains", runner.drain, phase="intake")

    async def stop_mid_reconcile() -> None:
        runner.queue.add("a")
        await wait_for(lambda: "a" in reconcile.running)
        supervisor.request_stop("test")
        await wait_for(lambda: runner.queue.is_shutting_down)
        gate.set()

    supervisor.start("stopper", stop_mid_reconcile(), until_stop=False)
    assert await supervisor.run() == EXIT_OK
    assert reconcile.interrupted == []
    assert outcomes(metrics)["success"] == 1


async def test_metrics_exist_from_the_start_and_count_busy_workers(
    clock: ManualClock, metrics: Metrics
) -> None:
    gate = asyncio.Event()

    async def slow(key: str) -> Result:
        await gate.wait()
        return Result()

    queue = WorkQueue[str](name="domains", metrics=metrics, clock=clock, rate_limit=PLAIN_BACKOFF)
    runner = ReconcileRunner(
        name="domains",
        queue=queue,
        reconcile=slow,
        metrics=metrics,
        settings=RunnerSettings(workers=3),
    )
    registry = metrics.registry
    # Before any reconcile, every result's series is there at 0, as controller-runtime has it.
    for result in ("success", "requeue_after", "error"):
        labels = {"controller": "domains", "result": result}
        assert registry.get_sample_value("controller_runtime_reconcile_total", labels) == 0
    for name in ("reconcile_errors_total", "terminal_reconcile_errors_total"):
        labels = {"controller": "domains"}
        assert registry.get_sample_value(f"controller_runtime_{name}", labels) == 0
    assert (
        sample(metrics, "controller_runtime_max_concurrent_reconciles", controller="domains") == 3
    )
    async with running(runner):
        queue.add("a")
        queue.add("b")
        await wait_for(lambda: queue.in_flight == 2, what="two keys in flight")
        assert sample(metrics, "controller_runtime_active_workers", controller="domains") == 2
        gate.set()
        await wait_for(lambda: queue.in_flight == 0, what="both done")
    assert sample(metrics, "controller_runtime_active_workers", controller="domains") == 0
    assert outcomes(metrics)["success"] == 2
