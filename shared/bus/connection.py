"""Connecting to NATS with reconnects configured and every callback wired.

:func:`connect` makes one connection within the reconnect budget of the settings (what a
command or a test's client wants); a service keeps its connection for life through
:mod:`shared.bus.link`. :class:`ConnectionWatch` follows a connection through nats-py's
callbacks: it counts connections and says when the feed goes down and comes back (one log line
per change).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from typing import Any

from nats.aio.client import ReconnectToServerHandler

from shared.bus.client import BusClient
from shared.bus.settings import NatsSettings
from shared.bus.token import TokenFile
from shared.errors import ConfigError

log = logging.getLogger("cdo.bus")


class ConnectionWatch:
    """Connection lifecycle as seen through nats-py callbacks.

    Before :meth:`established` (while first connections are tried) a failing attempt is
    quiet here: whoever retries says so once. From then on a lost connection is one warning
    (``nats disconnected``), its return one info line (``nats reconnected``); the errors of
    the attempts in between are kept in :attr:`last_error` and logged at debug level.
    """

    def __init__(self) -> None:
        self.disconnects = 0
        self.reconnects = 0
        self.connections = 0
        """Connections made: the first, then one per reconnect."""
        self.closing = False
        """Set before a deliberate close, so the disconnect it causes is not a warning."""
        self.last_error = ""
        self._down = False
        self._established = False
        self._changed = asyncio.Event()

    def established(self) -> None:
        """The first connection is made."""
        self._established = True
        self._down = False
        self.connections += 1
        self._changed.set()

    async def next_connection(self, after: int) -> None:
        """Wait until more than ``after`` connections were made."""
        while self.connections <= after:
            self._changed.clear()
            await self._changed.wait()

    async def on_error(self, exc: Exception) -> None:
        # Without this callback nats-py prints a traceback for every failed attempt.
        self.last_error = f"{type(exc).__name__}: {exc}"
        quiet = self._down or not self._established or self.closing
        log.log(
            logging.DEBUG if quiet else logging.WARNING,
            "nats error",
            extra={"error": self.last_error},
        )

    async def on_disconnected(self) -> None:
        if not self._established:
            return  # a first connection that failed: its caller retries and says so
        self.disconnects += 1
        self._down = True
        level = logging.INFO if self.closing else logging.WARNING
        log.log(
            level,
            "nats disconnected",
            extra={"disconnects": self.disconnects, "feed": "down", "error": self.last_error},
        )

    async def on_reconnected(self) -> None:
        self.reconnects += 1
        self.connections += 1
        self._down = False
        self._changed.set()
        log.info("nats reconnected", extra={"reconnects": self.reconnects, "feed": "up"})

    async def on_closed(self) -> None:
        if not self._established:
            return
        log.info("nats connection closed")


def _tls_context(settings: NatsSettings) -> ssl.SSLContext | None:
    if not (settings.tls_ca_file or settings.tls_cert_file):
        return None
    context = ssl.create_default_context(cafile=settings.tls_ca_file or None)
    if settings.tls_cert_file:
        context.load_cert_chain(settings.tls_cert_file, settings.tls_key_file or None)
    return context


TOKEN_FILE_VARIABLE = "CDO_NATS_TOKEN_FILE"


def connect_options(
    settings: NatsSettings,
    *,
    name: str,
    watch: ConnectionWatch,
    reconnect_handler: ReconnectToServerHandler | None = None,
) -> dict[str, Any]:
    """Keyword arguments for nats-py's connect, from settings (pure, but for checking that a
    token file can be read). Raises ConfigError naming the variable of a bad setting.

    ``reconnect_handler`` paces nats-py's reconnect attempts (and picks the server)."""
    options: dict[str, Any] = {
        "servers": [url.strip() for url in settings.url.split(",") if url.strip()],
        "name": name,
        "allow_reconnect": True,
        "connect_timeout": settings.connect_timeout_s,
        "reconnect_time_wait": settings.reconnect_wait_s,
        "max_reconnect_attempts": settings.max_reconnect_attempts,
        "error_cb": watch.on_error,
        "disconnected_cb": watch.on_disconnected,
        "reconnected_cb": watch.on_reconnected,
        "closed_cb": watch.on_closed,
    }
    if reconnect_handler is not None:
        options["reconnect_to_server_handler"] = reconnect_handler
    if settings.user:
        options["user"] = settings.user
        options["password"] = settings.password
    if settings.creds_file:
        options["user_credentials"] = settings.creds_file
    if settings.token_file:
        if settings.user:
            raise ConfigError(
                f"{TOKEN_FILE_VARIABLE}: a token and CDO_NATS_USER cannot both be set"
            )
        options["token"] = TokenFile(settings.token_file, variable=TOKEN_FILE_VARIABLE)
    tls = _tls_context(settings)
    if tls is not None:
        options["tls"] = tls
    return options


async def connect(
    settings: NatsSettings,
    *,
    name: str,
    watch: ConnectionWatch,
    reconnect_handler: ReconnectToServerHandler | None = None,
) -> BusClient:
    """Connect, retrying up to the reconnect budget; raises when no server answered."""
    client = BusClient()
    try:
        await client.connect(
            **connect_options(settings, name=name, watch=watch, reconnect_handler=reconnect_handler)
        )
    except BaseException:
        # A connect that failed or was cancelled half-way may hold an open transport (and its
        # tasks); nats-py leaves it open. The socket is closed at once, the rest shielded from
        # the cancellation itself.
        client.shut()
        with contextlib.suppress(Exception):
            await asyncio.shield(client.close())
        raise
    watch.established()
    return client
