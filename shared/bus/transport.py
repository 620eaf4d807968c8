"""The TCP transport the bus's NATS client connects with: nats-py's own, connecting under
:func:`asyncio.timeout` instead of :func:`asyncio.wait_for`.

On Python 3.11 ``wait_for`` runs the connect in a task of its own, and when it is cancelled
(the connect timeout, a reconnect stopped by a close, a service stopping) just as that task
has made the connection, it drops the result: the socket stays open and nobody holds it, until
the event loop is gone. ``asyncio.timeout`` cancels the connect in the caller's own task, where
a connection made is either returned or closed by asyncio itself.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any
from urllib.parse import ParseResult

from nats.aio.transport import TcpTransport


class BusTcpTransport(TcpTransport):
    """nats-py's :class:`TcpTransport` whose connects lose no connection when cancelled."""

    async def connect(self, uri: ParseResult, buffer_size: int, connect_timeout: int) -> None:
        async with asyncio.timeout(connect_timeout):
            reader, writer = await asyncio.open_connection(
                host=uri.hostname, port=uri.port, limit=buffer_size
            )
        # Kept as nats-py keeps them: the bare pair outlives a TLS upgrade.
        self._bare_io_reader = self._io_reader = reader
        self._bare_io_writer = self._io_writer = writer

    async def connect_tls(
        self,
        uri: str | ParseResult,
        ssl_context: ssl.SSLContext,
        buffer_size: int,
        connect_timeout: int,
    ) -> None:
        if self._io_writer is None:
            raise RuntimeError("connect_tls before connect")
        reader = asyncio.StreamReader()
        protocol = asyncio.StreamReaderProtocol(reader)
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(connect_timeout):
            transport: Any = await loop.start_tls(
                self._io_writer.transport,
                protocol,
                ssl_context,
                server_hostname=uri if isinstance(uri, str) else uri.hostname,
            )
        self._io_reader = reader
        self._io_writer = asyncio.StreamWriter(transport, protocol, reader, loop)
