"""A service's connection to NATS, kept for its whole life: made in the background, retried
forever with a capped backoff, never a reason for the service to stop.

    client = await connect_forever(settings, name="domain-controller/pod-1", watch=watch)

- **The first connection** is tried at once, then again after pauses that double from
  ``CDO_NATS_RECONNECT_WAIT_S`` up to ``CDO_NATS_RECONNECT_MAX_WAIT_S``. The first failure is
  one warning (``event feed down``, with the URL and the error); the attempts after it are
  quiet, so a NATS URL that never answers is one line in the log, not a crash loop.
- **A lost connection** is nats-py's to restore (it keeps the subscriptions): the client is told
  never to give up, and its attempts are paced by the same backoff through nats-py's
  ``reconnect_to_server_handler``.

Each pause is shortened by up to :data:`SPREAD` at random, so that the per-node services of a
whole fleet do not come back in step after a NATS outage.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from typing import Any

import msgspec
from nats.aio.client import Server

from shared.bus.cancellation import cancellable
from shared.bus.client import BusClient
from shared.bus.connection import ConnectionWatch, connect
from shared.bus.settings import NatsSettings
from shared.errors import ConfigError

log = logging.getLogger("cdo.bus")

SPREAD = 0.2
"""Largest share of a pause taken off at random."""
ATTEMPTS_PER_TRY = 1
"""nats-py's budget for one try of a first connection: each server is tried twice (nats-py
counts the first attempt against the budget), then the backoff here takes over."""


def reconnect_delay(
    failures: int,
    *,
    first_s: float,
    cap_s: float,
    spread: float = SPREAD,
    draw: Callable[[], float] = random.random,
) -> float:
    """Seconds to wait before the next attempt after ``failures`` failed ones in a row (pure
    with ``draw``): none after none, then ``first_s`` doubling up to ``cap_s``, each shortened
    by up to ``spread``."""
    if failures <= 0:
        return 0.0
    base: float = min(cap_s, first_s * 2.0 ** min(failures - 1, 32))
    return base * (1.0 - spread * draw())


def reconnect_handler(
    settings: NatsSettings,
) -> Callable[[list[Server], dict[str, Any]], tuple[Server | None, float]]:
    """nats-py's ``reconnect_to_server_handler``: the server tried least often, after the
    backoff its failures call for."""

    def choose(servers: list[Server], _info: dict[str, Any]) -> tuple[Server | None, float]:
        if not servers:
            return None, settings.reconnect_wait_s
        server = min(servers, key=lambda s: s.reconnects)
        delay = reconnect_delay(
            server.reconnects,
            first_s=settings.reconnect_wait_s,
            cap_s=settings.reconnect_max_wait_s,
        )
        return server, delay

    return choose


async def connect_forever(
    settings: NatsSettings,
    *,
    name: str,
    watch: ConnectionWatch,
    keep: Callable[[BusClient], None],
) -> BusClient:
    """Connect, trying again after each failure with the backoff, until a connection is made
    (or the task is cancelled); the client then reconnects forever by itself. ``keep`` gets a
    connection made as the task was cancelled, so that the caller can still close it."""
    per_try = msgspec.structs.replace(settings, max_reconnect_attempts=ATTEMPTS_PER_TRY)
    handler = reconnect_handler(settings)
    failures = 0
    while True:
        try:
            client = await cancellable(
                connect(per_try, name=name, watch=watch, reconnect_handler=handler), keep=keep
            )
        except (asyncio.CancelledError, ConfigError):
            raise
        except Exception as exc:
            failures += 1
            error = f"{type(exc).__name__}: {exc}"
            if failures == 1:
                log.warning(
                    "event feed down: cannot connect to NATS; retrying",
                    extra={
                        "url": settings.url,
                        "error": error,
                        "feed": "down",
                        "max_wait_s": settings.reconnect_max_wait_s,
                    },
                )
            else:
                log.debug("nats connect failed", extra={"error": error, "failures": failures})
            await asyncio.sleep(
                reconnect_delay(
                    failures, first_s=settings.reconnect_wait_s, cap_s=settings.reconnect_max_wait_s
                )
            )
            continue
        client.reconnect_forever()
        log.info(
            "nats connected",
            extra={
                "url": client.connected_url.netloc if client.connected_url else "",
                "feed": "up",
            },
        )
        return client
