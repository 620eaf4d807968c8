"""Bounded polling for tests: wait for a condition instead of sleeping for a fixed time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


class ConditionTimeout(AssertionError):
    """The condition did not hold before the deadline."""


async def wait_for(
    probe: Callable[[], Awaitable[T | None] | T | None],
    *,
    timeout: float = 10.0,
    interval: float = 0.02,
    what: str = "condition",
) -> T:
    """Poll ``probe`` until it returns a truthy value and return that value.

    ``probe`` may be a plain or an async callable. Raises ConditionTimeout naming ``what``.
    """
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        result = probe()
        if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
            result = await result
        if result:
            return result  # type: ignore[return-value]
        last = result
        if time.monotonic() >= deadline:
            raise ConditionTimeout(f"timed out after {timeout}s waiting for {what} (last={last!r})")
        await asyncio.sleep(interval)


def wait_for_sync(
    probe: Callable[[], T | None],
    *,
    timeout: float = 10.0,
    interval: float = 0.02,
    what: str = "condition",
) -> T:
    """Blocking variant of :func:`wait_for` for synchronous tests."""
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise ConditionTimeout(f"timed out after {timeout}s waiting for {what} (last={result!r})")
        time.sleep(interval)
