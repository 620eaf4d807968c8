"""Work queue guarantees over generated schedules of adds, workers and delays."""

from __future__ import annotations

import asyncio
import itertools
from collections import defaultdict
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.kube import ManualClock, QueueShutDownError, WorkQueue
from shared.metrics import Metrics
from tests.support.wait import wait_for
from tests.unit.kube.helpers import take_ready

KEYS = st.sampled_from(["a", "b", "c", "d"])


@dataclass
class Trace:
    """What happened, on a logical clock that ticks at every event."""

    ticks: itertools.count[int] = field(default_factory=itertools.count)
    running: set[str] = field(default_factory=set)
    overlaps: list[str] = field(default_factory=list)
    adds: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    starts: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))


async def _worker(queue: WorkQueue[str], trace: Trace, work_yields: list[int]) -> None:
    lengths = itertools.cycle(work_yields)
    while True:
        try:
            key = await queue.get()
        except QueueShutDownError:
            return
        if key in trace.running:
            trace.overlaps.append(key)
        trace.running.add(key)
        trace.starts[key].append(next(trace.ticks))
        for _ in range(next(lengths)):
            await asyncio.sleep(0)
        trace.running.discard(key)
        queue.done(key)


async def _schedule(script: list[tuple[str, int]], workers: int, work_yields: list[int]) -> Trace:
    queue = WorkQueue[str](name="prop", metrics=Metrics(), clock=ManualClock())
    trace = Trace()
    async with asyncio.TaskGroup() as group:
        for _ in range(workers):
            group.create_task(_worker(queue, trace, work_yields))
        for key, pause in script:
            queue.add(key)
            trace.adds[key].append(next(trace.ticks))
            for _ in range(pause):
                await asyncio.sleep(0)
        await wait_for(
            lambda: len(queue) == 0 and queue.in_flight == 0, interval=0, what="queue idle"
        )
        queue.shut_down()
    return trace


@settings(max_examples=150, deadline=None)
@given(
    script=st.lists(st.tuples(KEYS, st.integers(0, 3)), max_size=40),
    workers=st.integers(1, 4),
    work_yields=st.lists(st.integers(0, 4), min_size=1, max_size=5),
)
def test_no_key_runs_twice_at_once_and_no_add_is_lost(
    script: list[tuple[str, int]], workers: int, work_yields: list[int]
) -> None:
    trace = asyncio.run(_schedule(script, workers, work_yields))
    assert trace.overlaps == [], "a key ran on two workers at once"
    for key, adds in trace.adds.items():
        starts = trace.starts[key]
        # Every add is followed by a run that started after it ...
        assert starts and starts[-1] > adds[-1], f"the last add of {key} was lost"
        # ... and adds coalesce: never more runs than adds.
        assert len(starts) <= len(adds)
    assert set(trace.starts) <= set(trace.adds)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(KEYS, st.integers(1, 50)), max_size=30))
def test_held_keys_come_out_at_their_earliest_time_in_time_order(
    holds: list[tuple[str, int]],
) -> None:
    # Delays in whole milliseconds, so equal times compare equal.
    earliest: dict[str, tuple[int, int]] = {}
    for order, (key, delay_ms) in enumerate(holds):
        if key not in earliest or delay_ms < earliest[key][0]:
            earliest[key] = (delay_ms, order)
    expected = sorted(earliest, key=lambda key: earliest[key])

    async def run() -> list[tuple[int, str]]:
        clock = ManualClock()
        queue = WorkQueue[str](name="prop", metrics=Metrics(), clock=clock)
        for key, delay_ms in holds:
            queue.add_after(key, delay_ms / 1000)
        released: list[tuple[int, str]] = []
        for when_ms in sorted({delay for delay, _ in earliest.values()}):
            clock.advance_to(when_ms / 1000)
            released += [(when_ms, key) for key in await take_ready(queue)]
        clock.advance(1.0)
        assert await take_ready(queue) == []
        return released

    released = asyncio.run(run())
    assert [key for _, key in released] == expected
    assert all(when_ms == earliest[key][0] for when_ms, key in released)
