"""Connect, set the stream and the bucket up, disconnect; every failure as one sentence."""

from __future__ import annotations

import contextlib

from nats import errors as nats_errors

from shared.bus.client import BusClient
from shared.bus.connection import ConnectionWatch, connect
from shared.bus.jetstream import SetUp, set_up
from shared.bus.settings import NatsSettings

API_TIMEOUT_S = 5.0
"""How long one JetStream API call may take. A call this identity may not make gets no
answer at all (the server only tells the connection), so a refusal ends here too."""


class BootstrapFailedError(Exception):
    """NATS could not be reached, or refused or did not answer a JetStream call."""


async def bootstrap(settings: NatsSettings) -> SetUp:
    """Create or update the stream and the bucket ``settings`` describe."""
    watch = ConnectionWatch()
    try:
        client: BusClient = await connect(settings, name="cdo-nats-bootstrap", watch=watch)
    except (nats_errors.Error, OSError, TimeoutError) as exc:
        raise BootstrapFailedError(
            f"cannot connect to NATS at {settings.url}: {type(exc).__name__}: {exc}"
            + (f" ({watch.last_error})" if watch.last_error else "")
        ) from exc
    try:
        return await set_up(client.jetstream(timeout=API_TIMEOUT_S), settings)
    except nats_errors.TimeoutError as exc:
        raise BootstrapFailedError(
            "a JetStream call got no answer: JetStream is off or not ready, or this identity "
            "may not administer it (only the NATS bootstrap's may)"
            + (f"; the server said: {watch.last_error}" if watch.last_error else "")
        ) from exc
    except nats_errors.Error as exc:
        raise BootstrapFailedError(f"JetStream refused the set-up: {exc}") from exc
    finally:
        watch.closing = True
        with contextlib.suppress(nats_errors.Error):
            await client.close()
