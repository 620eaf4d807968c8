"""Restoring a cancellation that nats-py swallowed.

nats-py catches ``CancelledError`` while it flushes or drains (connecting and JetStream requests
flush too) and returns as if nothing happened. A task cancelled in that moment would go on
running with its cancellation spent, and whoever waits for it (a TaskGroup, a supervisor,
``await task``) would wait forever. The bus awaits such calls through :func:`cancellable`, which
raises the cancellation again when one arrived during the call. A cancellation that was already
pending before the call (a shutdown running in a ``finally`` of a cancelled task) is left alone,
so the rest of that shutdown still runs. What such a call made before the cancellation was
raised again (a connection) is handed to ``keep``, so that the caller can still close it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def cancellable(call: Awaitable[T], *, keep: Callable[[T], None] | None = None) -> T:
    """Await ``call``; raise CancelledError if this task was cancelled meanwhile and the call
    returned anyway (its result handed to ``keep`` first)."""
    task = asyncio.current_task()
    before = task.cancelling() if task is not None else 0
    result = await call
    if task is not None and task.cancelling() > before:
        if keep is not None:
            keep(result)
        raise asyncio.CancelledError
    return result
