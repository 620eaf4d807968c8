"""A work queue on a manual clock, so backoff and delays play out exactly and instantly."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from shared.kube import ManualClock, RateLimitSettings, WorkQueue
from shared.metrics import Metrics
from tests.unit.kube.helpers import PLAIN_BACKOFF

QueueFactory = Callable[..., WorkQueue[str]]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(start=100.0)


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


@pytest.fixture
def make_queue(clock: ManualClock, metrics: Metrics) -> QueueFactory:
    def make(*, rate_limit: RateLimitSettings = PLAIN_BACKOFF) -> WorkQueue[str]:
        return WorkQueue[str](name="test", metrics=metrics, clock=clock, rate_limit=rate_limit)

    return make


@pytest.fixture
def queue(make_queue: QueueFactory) -> WorkQueue[str]:
    return make_queue()
