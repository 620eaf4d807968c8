"""Restoring a cancellation that nats-py swallowed.

nats-py catches ``CancelledError`` while it flushes or drains (connecting and JetStream requests
flush too) and returns as if nothing happened. A task cancelled in that moment would go on
running with its cancellation spent, and whoever waits for it (a TaskGroup, a supervisor,
``await task``) would wait forever. The bus awaits such calls through :func:`cancellable`, which
raises the cancellation again when one arrived during the call. A cancellation that was already
pending before the call (a shutdown running in a ``finally`` of a cancelled task) is left alone,
so the rest of that shutdown still runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def cancellable(call: Awaitable[T]) -> T:
    """Await ``call``; raise CancelledError if this task was cancelled meanwhile and the call
    returned anyway."""
    task = asyncio.current_task()
    before = task.cancelling() if task is not None else 0
    result = await call
    if task is not None and task.cancelling() > before:
        raise asyncio.CancelledError
    return result
