"""Latest-state snapshots in a JetStream KV bucket, written without blocking the publisher.

A snapshot only needs the newest value per key, so offers for the same key coalesce: during a
burst only the last one is written. Writes are plain publishes on the bucket's ``$KV.<bucket>.
<key>`` subjects (the same message a KV put sends), so the publish path never waits for an ack.

Snapshots are written only while connected: offers made while NATS is down wait, one per key,
and are written when the connection is back. The writer also remembers the newest value of
every key it was offered (one per entity this publisher owns), and :meth:`rewrite_all` writes
them all again: after a reconnection the bucket holds this publisher's latest state even if the
server lost writes or its whole store meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

PublishFn = Callable[[str, bytes, bytes], Awaitable[None]]
"""Publishes (subject, header block, payload)."""

log = logging.getLogger("cdo.bus")


class SnapshotWriter:
    """Coalesces snapshot offers per key and writes them from one loop while connected."""

    def __init__(
        self,
        *,
        bucket: str,
        publish: PublishFn,
        connected: Callable[[], bool] = lambda: True,
    ) -> None:
        self._prefix = f"$KV.{bucket}."
        self._publish = publish
        self._connected = connected
        self._pending: dict[str, tuple[bytes, bytes]] = {}
        self._latest: dict[str, tuple[bytes, bytes]] = {}
        self._wakeup = asyncio.Event()

    def offer(self, key: str, payload: bytes, block: bytes) -> None:
        """Record ``payload`` (with its header block) as the newest value of ``key``; it is
        written soon (once connected)."""
        self._pending[key] = self._latest[key] = (payload, block)
        self._wakeup.set()

    @property
    def pending(self) -> int:
        return len(self._pending)

    def wake(self) -> None:
        """Write what waits now (the connection is back)."""
        self._wakeup.set()

    def rewrite_all(self) -> int:
        """Queue the newest value of every key offered so far for writing again; how many."""
        self._pending.update(self._latest)
        self._wakeup.set()
        return len(self._latest)

    async def flush(self) -> None:
        """Write every pending snapshot now. One that cannot be written stays pending (unless
        a newer offer for its key came meanwhile) and the error is raised."""
        batch, self._pending = self._pending, {}
        keys = list(batch)
        written = 0
        try:
            for key in keys:
                payload, block = batch[key]
                await self._publish(self._prefix + key, block, payload)
                written += 1
        except BaseException:
            # The unwritten rest of the batch waits again; newer offers for a key win.
            rest = {key: batch[key] for key in keys[written:]}
            rest.update(self._pending)
            self._pending = rest
            raise

    async def run(self) -> None:
        """Write offers as they arrive while connected, until cancelled."""
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            if not self._connected():
                continue  # woken again when the connection is back
            try:
                await self.flush()
            except Exception as exc:  # the connection went away mid-way: on the next wake
                log.debug("snapshot write failed", extra={"error": str(exc)})
