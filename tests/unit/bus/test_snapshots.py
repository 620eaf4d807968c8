"""The snapshot writer: coalesced per key, written only while connected, written again after a
reconnection, and nothing lost when a write fails."""

from __future__ import annotations

import asyncio

import pytest

from shared.bus.snapshots import SnapshotWriter


class Link:
    def __init__(self) -> None:
        self.connected = False
        self.written: list[tuple[str, bytes]] = []
        self.fail_after: int | None = None

    async def publish(self, subject: str, block: bytes, payload: bytes) -> None:
        if self.fail_after is not None and len(self.written) >= self.fail_after:
            raise ConnectionError("gone")
        self.written.append((subject, payload))


async def test_offers_wait_while_disconnected_one_per_key_and_go_out_on_connect() -> None:
    link = Link()
    writer = SnapshotWriter(bucket="b", publish=link.publish, connected=lambda: link.connected)
    task = asyncio.create_task(writer.run())
    try:
        writer.offer("k1", b"old", b"")
        writer.offer("k1", b"new", b"")
        writer.offer("k2", b"x", b"")
        await asyncio.sleep(0)
        assert link.written == [] and writer.pending == 2
        link.connected = True
        writer.wake()
        for _ in range(10):
            await asyncio.sleep(0)
        assert link.written == [("$KV.b.k1", b"new"), ("$KV.b.k2", b"x")]
        # After a reconnection the newest value of every key is written again.
        assert writer.rewrite_all() == 2
        for _ in range(10):
            await asyncio.sleep(0)
        assert link.written[2:] == [("$KV.b.k1", b"new"), ("$KV.b.k2", b"x")]
    finally:
        task.cancel()


async def test_a_failed_write_keeps_what_was_not_written_behind_newer_offers() -> None:
    link = Link()
    link.connected = True
    link.fail_after = 1
    writer = SnapshotWriter(bucket="b", publish=link.publish)
    for key in ("a", "b", "c"):
        writer.offer(key, key.encode(), b"")
    with pytest.raises(ConnectionError):
        await writer.flush()
    writer.offer("c", b"c2", b"")
    assert writer.pending == 2
    link.fail_after = None
    await writer.flush()
    assert link.written == [("$KV.b.a", b"a"), ("$KV.b.b", b"b"), ("$KV.b.c", b"c2")]
