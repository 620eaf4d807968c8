"""The nats-py client the bus connects with: nats-py's own, plus publishing a prepared header
block and a faster reader of received ones (see :mod:`shared.bus.wire`).

Both hook into two internal methods of nats-py's client (``_send_publish``, which every publish
goes through, and ``_parse_header_lines``, which reads every received header block).

It connects through :class:`shared.bus.transport.BusTcpTransport` (``_connect_to_server``), and a
close cut short still closes its socket (``_close``, :meth:`BusClient.shut`).

It also mends how nats-py takes a PONG (``_process_pong``): nats-py sets the result of the first
queued PING's future, and a flush that was cancelled or timed out (its own, or one inside
``drain``) leaves a cancelled future there. Setting it raised ``InvalidStateError`` in the
read loop, which then stopped for good: the connection looked connected and received nothing
more, and a drain waited out its timeout. That PONG answers the abandoned PING, so it is
consumed without a result. Where the
installed nats-py does not have them as expected, :data:`PREPARED_PUBLISH` is false and the
bus publishes with a plain header dict instead; the tests check that the installed version
takes the prepared path and that what arrives is the same either way.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from typing import Any

from nats.aio.client import DEFAULT_BUFFER_SIZE, Client, Srv
from nats.protocol.command import hpub_cmd

from shared.bus import wire
from shared.bus.transport import BusTcpTransport


def _send_publish_as_expected() -> bool:
    method = getattr(Client, "_send_publish", None)
    if method is None or not hasattr(Client, "_send_command"):
        return False
    try:
        names = list(inspect.signature(method).parameters)
    except (TypeError, ValueError):
        return False
    return names == ["self", "subject", "reply", "payload", "payload_size", "headers"]


PREPARED_PUBLISH = _send_publish_as_expected()
"""Whether :meth:`BusClient.publish_block` sends the prepared block as it is."""

_NATS_PARSER = getattr(Client, "_parse_header_lines", None)


class _Block(dict[str, str]):
    """A header block travelling through nats-py's ``publish`` to ``_send_publish``; as a dict
    it is empty, so it is only ever passed when :data:`PREPARED_PUBLISH` holds."""

    __slots__ = ("block",)

    def __init__(self, block: bytes) -> None:
        super().__init__()
        self.block = block


class BusClient(Client):
    """nats-py's client with :meth:`publish_block`; connect it with ``await client.connect(...)``
    as ``nats.connect`` does. ``prepared=False`` takes the fallback path (plain header dicts)
    even where the installed nats-py has the hooks, so that the tests can run both."""

    def __init__(self, *, prepared: bool = PREPARED_PUBLISH) -> None:
        super().__init__()
        self._prepared = prepared and PREPARED_PUBLISH

    async def publish_block(
        self, subject: str, block: bytes, payload: bytes, reply: str = ""
    ) -> None:
        """Publish ``payload`` with ``block``, a whole header block (see :mod:`wire`), and
        ``reply`` as its reply subject.

        Goes through nats-py's ``publish`` (its checks for a closed, draining or reconnecting
        connection and the payload limit apply as to any publish).
        """
        if self._prepared:
            await self.publish(subject, payload, reply, headers=_Block(block))
        else:
            await self.publish(subject, payload, reply, headers=parse_block(block))

    def shut(self) -> None:
        """Close the socket and stop every task of the client at once, awaiting nothing, and
        mark it closed so that it never reconnects: what a close or a drain cut short (a
        caller's timeout, a cancellation) would otherwise leave open until the event loop is
        gone, or reopen on its own."""
        self._status = Client.CLOSED
        current = asyncio.current_task()
        for task in (
            self._reconnection_task,
            self._reading_task,
            self._ping_interval_task,
            self._flusher_task,
        ):
            if task is not None and task is not current and not task.done():
                task.cancel()
        if self._transport is not None:
            self._transport.close()  # type: ignore[no-untyped-call]

    async def _connect_to_server(self, s: Srv) -> None:
        # nats-py's own, with the transport whose connect loses no connection when cancelled
        # (see its module). nats-py replaces any transport that is not connected, so the
        # choice is made here rather than before its method runs.
        if s.uri.scheme in ("ws", "wss"):
            await super()._connect_to_server(s)
            return
        s.last_attempt = time.monotonic()
        if not self._transport:
            self._transport = BusTcpTransport()  # type: ignore[no-untyped-call]
        await self._transport.connect(
            s.uri,
            buffer_size=DEFAULT_BUFFER_SIZE,
            connect_timeout=self.options["connect_timeout"],
        )

    async def _close(self, status: int, do_cbs: bool = True) -> None:
        # nats-py marks the client closed before it closes the socket: a close cancelled in
        # between would leave the socket open with every later close a no-op.
        try:
            await super()._close(status, do_cbs)
        except BaseException:
            self.shut()
            raise

    def reconnect_forever(self) -> None:
        """Never give up reconnecting from now on (nats-py reads the budget on every attempt;
        the first connection was made within the budget it was given)."""
        self.options["max_reconnect_attempts"] = -1

    async def _send_publish(
        self,
        subject: str,
        reply: str,
        payload: bytes,
        payload_size: int,
        headers: dict[str, Any] | None,
    ) -> None:
        if type(headers) is not _Block:
            await super()._send_publish(subject, reply, payload, payload_size, headers)
            return
        # What nats-py's own method does after it has built the block from a dict.
        command = hpub_cmd(subject, reply, headers.block, payload)
        self.stats["out_msgs"] += 1
        self.stats["out_bytes"] += payload_size
        await self._send_command(command)
        if self._flush_queue is not None and self._flush_queue.empty():
            await self._flush_pending()

    async def _process_pong(self) -> None:
        pongs = getattr(self, "_pongs", None)  # nats-py's queue of PING futures
        if pongs and pongs[0].done():
            # The PONG of a PING whose flush was abandoned (cancelled or timed out).
            pongs.pop(0)
            self._pongs_received += 1
            self._pings_outstanding = 0
            return
        await super()._process_pong()

    if _NATS_PARSER is not None:

        @staticmethod
        def _parse_header_lines(raw: bytes) -> dict[str, str]:
            return wire.parse_header_lines(raw, _nats_parse)


def _nats_parse(raw: bytes) -> dict[str, str]:
    if _NATS_PARSER is None:  # an older nats-py: split plainly, as the block is canonical
        return dict(line.split(": ", 1) for line in raw.decode().split("\r\n") if line)
    parsed: dict[str, str] = _NATS_PARSER(raw)
    return parsed


def parse_block(block: bytes) -> dict[str, str]:
    """The headers of a whole block (for publishing without :data:`PREPARED_PUBLISH`)."""
    return wire.parse_header_lines(block[len(wire.HEADER_LINE) :], _nats_parse)
