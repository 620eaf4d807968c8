"""A coroutine running as a task for the length of a ``with`` block, cancelled and awaited at
its end, as a service's supervisor runs its root tasks."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from typing import Any


@contextlib.asynccontextmanager
async def running(coro: Coroutine[Any, Any, None], name: str | None = None) -> AsyncIterator[None]:
    task = asyncio.create_task(coro, name=name)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
