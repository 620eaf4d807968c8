"""Bounded polling for tests: wait for a condition instead of sleeping for a fixed time."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")


class ConditionTimeoutError(AssertionError):
    """The condition did not hold before the deadline."""


@overload
async def wait_for(
    probe: Callable[[], Awaitable[T | None]],
    *,
    timeout: float = ...,  # noqa: ASYNC109
    interval: float = ...,
    what: str = ...,
) -> T: ...


@overload
async def wait_for(
    probe: Callable[[], T | None],
    *,
    timeout: float = ...,  # noqa: ASYNC109
    interval: float = ...,
    what: str = ...,
) -> T: ...


async def wait_for(
    probe: Callable[[], Any],
    *,
    timeout: float = 10.0,  # noqa: ASYNC109 - the deadline is the point of a bounded poll
    interval: float = 0.02,
    what: str = "condition",
) -> Any:
    """Poll ``probe`` until it returns a truthy value and return that value.

    ``probe`` may be a plain or an async callable. Raises ConditionTimeoutError naming ``what``.
    """
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result
        if time.monotonic() >= deadline:
            raise ConditionTimeoutError(
                f"timed out after {timeout}s waiting for {what} (last={result!r})"
            )
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
            raise ConditionTimeoutError(
                f"timed out after {timeout}s waiting for {what} (last={result!r})"
            )
        time.sleep(interval)
