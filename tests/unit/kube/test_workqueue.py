"""Work queue rules, one at a time, on a manual clock."""

from __future__ import annotations

import asyncio

import pytest

from shared.kube import ManualClock, QueueShutDownError, RateLimitSettings, WorkQueue
from shared.metrics import Metrics
from tests.support.wait import wait_for
from tests.unit.kube.conftest import QueueFactory
from tests.unit.kube.helpers import sample, take_ready


async def test_keys_come_out_in_the_order_they_were_added(queue: WorkQueue[str]) -> None:
    for key in ["b", "a", "c"]:
        queue.add(key)
    assert await take_ready(queue) == ["b", "a", "c"]


async def test_adding_a_waiting_key_again_coalesces(queue: WorkQueue[str]) -> None:
    for key in ["a", "b", "a", "a", "b"]:
        queue.add(key)
    assert len(queue) == 2
    assert await take_ready(queue) == ["a", "b"]


async def test_a_key_in_flight_is_not_handed_out_and_reruns_once_after_done(
    queue: WorkQueue[str],
) -> None:
    queue.add("a")
    assert await queue.get() == "a"
    for _ in range(5):
        queue.add("a")
    assert len(queue) == 0, "a key in flight must not be ready for a second worker"
    assert queue.is_in_flight("a")

    queue.done("a")
    assert await take_ready(queue) == ["a"]
    assert queue.in_flight == 0


async def test_done_without_new_adds_leaves_nothing_to_do(queue: WorkQueue[str]) -> None:
    queue.add("a")
    queue.done(await queue.get())
    assert len(queue) == 0
    assert queue.in_flight == 0


async def test_done_for_a_key_not_in_flight_is_a_bug(queue: WorkQueue[str]) -> None:
    with pytest.raises(ValueError, match="not in flight"):
        queue.done("a")


async def test_a_waiting_get_wakes_on_add(queue: WorkQueue[str]) -> None:
    getter = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    assert not getter.done()
    queue.add("a")
    assert await asyncio.wait_for(getter, 5) == "a"


async def test_a_cancelled_get_passes_its_wakeup_on(queue: WorkQueue[str]) -> None:
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.add("a")  # wakes `first`, which is cancelled before it can run
    first.cancel()
    assert await asyncio.wait_for(second, 5) == "a"
    assert first.cancelled()


@pytest.mark.parametrize(
    ("base_s", "max_s", "expected"),
    [
        (1.0, 60.0, [1, 2, 4, 8, 16, 32, 60, 60]),
        (0.005, 0.04, [0.005, 0.01, 0.02, 0.04, 0.04]),
        (2.0, 2.0, [2, 2, 2]),
    ],
)
async def test_rate_limited_adds_back_off_exponentially_up_to_the_cap(
    make_queue: QueueFactory,
    clock: ManualClock,
    base_s: float,
    max_s: float,
    expected: list[float],
) -> None:
    queue = make_queue(
        rate_limit=RateLimitSettings(
            backoff_base_s=base_s, backoff_max_s=max_s, retries_per_s=1e6, retry_burst=10**6
        )
    )
    for attempt, delay in enumerate(expected):
        added_at = clock.now()
        queue.add_rate_limited("a")
        assert queue.retries("a") == attempt + 1
        clock.advance_to(added_at + delay * 0.999)
        assert len(queue) == 0, f"retry {attempt} came before its {delay} s backoff"
        clock.advance_to(added_at + delay)
        assert await take_ready(queue) == ["a"]


async def test_forget_resets_the_backoff(queue: WorkQueue[str], clock: ManualClock) -> None:
    for _ in range(4):
        queue.add_rate_limited("a")
    clock.advance(100)
    await take_ready(queue)

    queue.forget("a")
    assert queue.retries("a") == 0
    queue.add_rate_limited("a")
    clock.advance(1.0)  # the base delay again, not 16 s
    assert await take_ready(queue) == ["a"]


async def test_backoff_is_per_key(queue: WorkQueue[str], clock: ManualClock) -> None:
    for _ in range(3):
        queue.add_rate_limited("slow")
        clock.advance(100)
        await take_ready(queue)
    queue.add_rate_limited("slow")  # its 4th failure in a row: 8 s
    queue.add_rate_limited("fresh")
    clock.advance(1.0)
    assert await take_ready(queue) == ["fresh"]
    clock.advance(7.0)
    assert await take_ready(queue) == ["slow"]


async def test_the_retry_budget_paces_retries_of_all_keys(
    make_queue: QueueFactory, clock: ManualClock
) -> None:
    # Tiny backoff, 2 retries at once, then 10 per second: retries leave 100 ms apart.
    queue = make_queue(
        rate_limit=RateLimitSettings(
            backoff_base_s=1e-6, backoff_max_s=1e-6, retries_per_s=10, retry_burst=2
        )
    )
    start = clock.now()
    for key in ["a", "b", "c", "d", "e"]:
        queue.add_rate_limited(key)
    released: list[tuple[float, list[str]]] = []
    for step in range(5):
        clock.advance_to(start + step * 0.1 + 1e-6)
        released.append((round(clock.now() - start, 3), await take_ready(queue)))
    assert released == [(0.0, ["a", "b"]), (0.1, ["c"]), (0.2, ["d"]), (0.3, ["e"]), (0.4, [])]


async def test_the_retry_budget_refills_up_to_its_burst(
    make_queue: QueueFactory, clock: ManualClock
) -> None:
    queue = make_queue(
        rate_limit=RateLimitSettings(
            backoff_base_s=1e-6, backoff_max_s=1e-6, retries_per_s=10, retry_burst=2
        )
    )
    queue.add_rate_limited("a")
    queue.add_rate_limited("b")
    clock.advance(3600)  # refills to the burst, not to 36,000 tokens
    await take_ready(queue)
    for key in ["c", "d", "e"]:
        queue.add_rate_limited(key)
    clock.advance(1e-6)
    assert await take_ready(queue) == ["c", "d"]
    clock.advance(0.1)
    assert await take_ready(queue) == ["e"]


async def test_plain_adds_are_never_rate_limited(
    make_queue: QueueFactory, clock: ManualClock
) -> None:
    queue = make_queue(
        rate_limit=RateLimitSettings(
            backoff_base_s=1.0, backoff_max_s=1.0, retries_per_s=0.001, retry_burst=1
        )
    )
    queue.add_rate_limited("x")
    queue.add_rate_limited("y")  # the budget is spent for ~1000 s
    for key in ["a", "b", "c"]:
        queue.add(key)
    assert await take_ready(queue) == ["a", "b", "c"]


async def test_add_after_holds_a_key_back_until_its_time(
    queue: WorkQueue[str], clock: ManualClock
) -> None:
    queue.add_after("late", 2.0)
    queue.add_after("early", 1.0)
    assert queue.held == 2
    clock.advance(0.5)
    assert len(queue) == 0
    clock.advance(0.5)
    assert await take_ready(queue) == ["early"]
    clock.advance(1.0)
    assert await take_ready(queue) == ["late"]
    assert queue.held == 0
    assert clock.pending == 0, "no timer is left once nothing is held"


async def test_add_after_twice_keeps_the_earlier_time(
    queue: WorkQueue[str], clock: ManualClock
) -> None:
    queue.add_after("a", 5.0)
    queue.add_after("a", 1.0)
    queue.add_after("a", 3.0)
    assert queue.held == 1
    clock.advance(1.0)
    assert await take_ready(queue) == ["a"]
    clock.advance(10.0)
    assert await take_ready(queue) == [], "the later entries were superseded"


async def test_add_after_with_no_delay_adds_now(queue: WorkQueue[str]) -> None:
    queue.add_after("a", 0)
    queue.add_after("b", -1)
    assert await take_ready(queue) == ["a", "b"]


async def test_a_held_key_that_is_already_waiting_coalesces(
    queue: WorkQueue[str], clock: ManualClock
) -> None:
    queue.add("a")
    queue.add_after("a", 1.0)
    clock.advance(1.0)
    assert await take_ready(queue) == ["a"]


async def test_one_timer_serves_every_held_key(queue: WorkQueue[str], clock: ManualClock) -> None:
    for index in range(100):
        queue.add_after(f"k{index}", 10.0 + index)
    assert clock.pending == 1


async def test_shut_down_wakes_getters_and_refuses_adds(
    queue: WorkQueue[str], clock: ManualClock
) -> None:
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await asyncio.sleep(0)
    queue.add_after("held", 1.0)
    queue.shut_down()
    results = await asyncio.gather(*getters, return_exceptions=True)
    assert all(isinstance(result, QueueShutDownError) for result in results)

    queue.add("a")
    queue.add_rate_limited("b")
    queue.add_after("c", 1.0)
    clock.advance(10)
    assert len(queue) == 0
    assert queue.held == 0
    with pytest.raises(QueueShutDownError):
        await queue.get()


async def test_shut_down_drops_waiting_keys(queue: WorkQueue[str]) -> None:
    queue.add("a")
    queue.shut_down()
    assert len(queue) == 0
    with pytest.raises(QueueShutDownError):
        await queue.get()


async def test_drain_waits_for_keys_in_flight(queue: WorkQueue[str]) -> None:
    queue.add("a")
    queue.add("b")
    first = await queue.get()
    second = await queue.get()
    queue.add(first)  # dirty while in flight: must not run again after shutdown

    drain = asyncio.create_task(queue.shut_down_with_drain())
    await asyncio.sleep(0)
    assert not drain.done()
    queue.done(first)
    await asyncio.sleep(0)
    assert not drain.done()
    queue.done(second)
    await asyncio.wait_for(drain, 5)
    assert len(queue) == 0


async def test_drain_of_an_idle_queue_returns_at_once(queue: WorkQueue[str]) -> None:
    await asyncio.wait_for(queue.shut_down_with_drain(), 5)
    await asyncio.wait_for(queue.shut_down_with_drain(), 5)


async def test_metrics_follow_the_queue(
    queue: WorkQueue[str], clock: ManualClock, metrics: Metrics
) -> None:
    labels = {"name": "test"}
    queue.add("a")
    queue.add("a")  # coalesced: not counted as an add
    queue.add("b")
    assert sample(metrics, "workqueue_adds_total", **labels) == 2
    assert sample(metrics, "workqueue_depth", **labels) == 2

    clock.advance(0.3)
    key = await queue.get()
    assert sample(metrics, "workqueue_queue_duration_seconds_sum", **labels) == pytest.approx(0.3)
    assert sample(metrics, "workqueue_depth", **labels) == 1

    clock.advance(2.0)
    other = await queue.get()
    clock.advance(1.0)
    assert sample(
        metrics, "workqueue_longest_running_processor_seconds", **labels
    ) == pytest.approx(3)
    assert sample(metrics, "workqueue_unfinished_work_seconds", **labels) == pytest.approx(4)

    queue.done(key)
    queue.done(other)
    assert sample(metrics, "workqueue_work_duration_seconds_count", **labels) == 2
    assert sample(metrics, "workqueue_work_duration_seconds_sum", **labels) == pytest.approx(4)
    assert sample(metrics, "workqueue_longest_running_processor_seconds", **labels) == 0

    queue.add_rate_limited("c")
    assert sample(metrics, "workqueue_retries_total", **labels) == 1


async def test_real_clock_releases_held_keys(metrics: Metrics) -> None:
    queue = WorkQueue[str](name="real", metrics=metrics)
    queue.add_after("a", 0.01)
    assert await wait_for(lambda: len(queue) == 1, timeout=5, what="held key released")
    assert await queue.get() == "a"
