"""Restoring a cancellation that nats-py swallowed.

nats-py catches ``CancelledError`` while it flushes or drains (connecting and JetStream requests
flush too) and returns as if nothing happened. A task cancelled in that moment would go on
running with its cancellation spent, and whoever waits for it (a TaskGroup, a supervisor,
``await task``) would wait forever. The bus awaits such calls through :func:`cancellable`, which
raises the cancellation again when one arrived during the call. A cancellation that was already
pending before the call (a shutdown running in a ``finally`` of a cancelled task) is left alone,
so the rest of that shutdown still runs. What such a call made before the cancellation was
raised again (a connection) is handed to ``keep``, so that the caller can still close it.

A flush must not be cancelled half-way at all: nats-py queues the flush's PONG future and, when
the PONG arrives, sets the result of whatever future is first in the queue. A cancelled one
makes that raise ``InvalidStateError`` in the connection's read loop, which then stops for good:
the connection still looks connected but receives nothing (no message, no PONG), and a drain
waits out its whole timeout. nats-py's own flush timeout cancels the future the same way.
:func:`uncancelled_flush` lets the flush finish on its own while a cancellation or a timeout
reaches the caller at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from nats.aio.client import DEFAULT_FLUSH_TIMEOUT, Client
from nats.errors import FlushTimeoutError

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


_flushes: set[asyncio.Task[None]] = set()
"""Flushes left to finish after their caller stopped waiting (held so they are not collected)."""

INNER_FLUSH_TIMEOUT_S = 3600
"""nats-py's own flush timeout cancels the PONG future too, so it is set out of reach; a flush
whose PONG never comes ends when a reconnect drops the queue (then at this timeout)."""


async def uncancelled_flush(nc: Client, *, timeout_s: float = DEFAULT_FLUSH_TIMEOUT) -> None:
    """``nc.flush()`` that is never cancelled half-way: a cancellation of the caller raises at
    once, a wait over ``timeout_s`` raises ``FlushTimeoutError``, and the flush itself goes on
    until its PONG arrives."""
    flush = asyncio.ensure_future(nc.flush(timeout=INNER_FLUSH_TIMEOUT_S))
    _flushes.add(flush)
    flush.add_done_callback(_finished)
    try:
        await cancellable(asyncio.wait_for(asyncio.shield(flush), timeout_s))
    except TimeoutError:
        raise FlushTimeoutError from None


def _finished(flush: asyncio.Task[None]) -> None:
    _flushes.discard(flush)
    if not flush.cancelled():
        flush.exception()  # retrieved: a caller that stopped waiting no longer reads it
