"""Latest-state snapshots in a JetStream KV bucket, written without blocking the publisher.

A snapshot only needs the newest value per key, so offers for the same key coalesce: during a
burst only the last one is written. Writes are plain publishes on the bucket's ``$KV.<bucket>.
<key>`` subjects (the same message a KV put sends), so the publish path never waits for an ack.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

PublishFn = Callable[[str, bytes, bytes], Awaitable[None]]
"""Publishes (subject, header block, payload)."""


class SnapshotWriter:
    """Coalesces snapshot offers per key and writes them from one loop."""

    def __init__(self, *, bucket: str, publish: PublishFn) -> None:
        self._prefix = f"$KV.{bucket}."
        self._publish = publish
        self._pending: dict[str, tuple[bytes, bytes]] = {}
        self._wakeup = asyncio.Event()

    def offer(self, key: str, payload: bytes, block: bytes) -> None:
        """Record ``payload`` (with its header block) as the newest value of ``key``; it is
        written soon."""
        self._pending[key] = (payload, block)
        self._wakeup.set()

    @property
    def pending(self) -> int:
        return len(self._pending)

    async def flush(self) -> None:
        """Write every pending snapshot now."""
        batch, self._pending = self._pending, {}
        for key, (payload, block) in batch.items():
            await self._publish(self._prefix + key, block, payload)

    async def run(self) -> None:
        """Write offers as they arrive, until cancelled."""
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            await self.flush()
