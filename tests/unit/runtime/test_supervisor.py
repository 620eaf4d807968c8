"""Supervision rules, in-process: first failure stops everything, shutdown runs in order."""

import asyncio

from shared.errors import FatalError
from shared.runtime.supervisor import EXIT_FATAL, EXIT_OK, Supervisor, describe_failure


async def forever(started: asyncio.Event | list[str], name: str) -> None:
    if isinstance(started, asyncio.Event):
        started.set()
    else:
        started.append(name)
    await asyncio.Event().wait()


async def test_first_failing_root_stops_the_others_and_exits_non_zero() -> None:
    supervisor = Supervisor(step_timeout_s=2)
    started: list[str] = []
    other = supervisor.start("other", forever(started, "other"))

    async def failing() -> None:
        await asyncio.sleep(0)
        raise RuntimeError("boom")

    supervisor.start("failing", failing())
    assert await supervisor.run() == EXIT_FATAL
    assert other.cancelled()


async def test_a_root_that_returns_early_is_a_failure_but_startup_may_finish() -> None:
    supervisor = Supervisor(step_timeout_s=2)

    async def done() -> None:
        return None

    supervisor.start("startup", done(), until_stop=False)
    supervisor.start("worker", done())
    assert await supervisor.run() == EXIT_FATAL


async def test_stop_request_runs_phases_in_order_and_exits_zero() -> None:
    supervisor = Supervisor(step_timeout_s=2)
    order: list[str] = []
    started = asyncio.Event()

    async def worker() -> None:
        try:
            await forever(started, "worker")
        finally:
            order.append("worker cancelled")

    supervisor.start("worker", worker())
    supervisor.on_shutdown("final", lambda: order.append("final"), phase="final")
    supervisor.on_shutdown("drain", lambda: order.append("drain"), phase="drain")

    async def intake() -> None:
        order.append("intake")

    supervisor.on_shutdown("intake", intake, phase="intake")

    async def stop_soon() -> None:
        await started.wait()
        supervisor.request_stop("test")

    stopper = asyncio.create_task(stop_soon())
    assert await supervisor.run() == EXIT_OK
    await stopper
    assert order == ["intake", "worker cancelled", "drain", "final"]


async def test_a_failing_or_hanging_step_does_not_block_later_steps() -> None:
    supervisor = Supervisor(step_timeout_s=0.2)
    order: list[str] = []

    def broken() -> None:
        raise RuntimeError("step failed")

    async def hangs() -> None:
        await asyncio.Event().wait()

    supervisor.on_shutdown("broken", broken, phase="intake")
    supervisor.on_shutdown("hangs", hangs, phase="drain")
    supervisor.on_shutdown("last", lambda: order.append("last"), phase="final")
    supervisor.request_stop("test")
    assert await supervisor.run() == EXIT_OK
    assert order == ["last"]


async def test_leftover_tasks_are_cancelled() -> None:
    supervisor = Supervisor(step_timeout_s=1)
    stray = asyncio.create_task(asyncio.Event().wait(), name="stray")
    supervisor.request_stop("test")
    assert await supervisor.run() == EXIT_OK
    assert stray.cancelled()


def test_a_failure_inside_a_task_group_is_described_by_its_cause() -> None:
    group = ExceptionGroup(
        "unhandled errors in a TaskGroup",
        [FatalError("beside NVIDIA"), ExceptionGroup("inner", [OSError("gone")])],
    )
    assert describe_failure(group) == "FatalError: beside NVIDIA; OSError: gone"
    assert describe_failure(ValueError("plain")) == "ValueError: plain"
