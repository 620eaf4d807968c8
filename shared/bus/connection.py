"""Connecting to NATS with reconnects configured and every callback wired.

nats-py gives up after its reconnect budget and then closes the connection; cdo treats that as
fatal: :class:`ConnectionWatch` records the close so the bus's root task can raise and the
supervisor can stop the service with a non-zero exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from typing import Any

from shared.bus.client import BusClient
from shared.bus.settings import NatsSettings
from shared.bus.token import TokenFile
from shared.errors import ConfigError

log = logging.getLogger("cdo.bus")


class ConnectionWatch:
    """Connection lifecycle as seen through nats-py callbacks."""

    def __init__(self) -> None:
        self.closed = asyncio.Event()
        self.disconnects = 0
        self.reconnects = 0
        self.closing = False
        """Set before a deliberate close, so the disconnect it causes is not a warning."""

    async def on_error(self, exc: Exception) -> None:
        # Without this callback nats-py prints a traceback for every failed attempt.
        log.warning("nats error", extra={"error": f"{type(exc).__name__}: {exc}"})

    async def on_disconnected(self) -> None:
        self.disconnects += 1
        level = logging.INFO if self.closing else logging.WARNING
        log.log(level, "nats disconnected", extra={"disconnects": self.disconnects})

    async def on_reconnected(self) -> None:
        self.reconnects += 1
        log.info("nats reconnected", extra={"reconnects": self.reconnects})

    async def on_closed(self) -> None:
        log.info("nats connection closed")
        self.closed.set()


def _tls_context(settings: NatsSettings) -> ssl.SSLContext | None:
    if not (settings.tls_ca_file or settings.tls_cert_file):
        return None
    context = ssl.create_default_context(cafile=settings.tls_ca_file or None)
    if settings.tls_cert_file:
        context.load_cert_chain(settings.tls_cert_file, settings.tls_key_file or None)
    return context


TOKEN_FILE_VARIABLE = "CDO_NATS_TOKEN_FILE"


def connect_options(settings: NatsSettings, *, name: str, watch: ConnectionWatch) -> dict[str, Any]:
    """Keyword arguments for nats-py's connect, from settings (pure, but for checking that a
    token file can be read). Raises ConfigError naming the variable of a bad setting."""
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


async def connect(settings: NatsSettings, *, name: str, watch: ConnectionWatch) -> BusClient:
    """Connect, retrying up to the reconnect budget; raises when no server answered."""
    client = BusClient()
    try:
        await client.connect(**connect_options(settings, name=name, watch=watch))
    except BaseException:
        # A connect that failed or was cancelled half-way may hold an open transport (and its
        # tasks); nats-py leaves it open. Closed here, shielded from the cancellation itself.
        with contextlib.suppress(Exception):
            await asyncio.shield(client.close())
        raise
    return client
