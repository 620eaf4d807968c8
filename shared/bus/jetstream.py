"""The JetStream objects cdo relies on, created or updated idempotently at start.

- stream ``CDO`` (configurable) captures ``cdo.v1.>``: the replayable event history, with a
  duplicate window so a re-sent ``Nats-Msg-Id`` is stored once;
- KV bucket ``cdo-snapshots`` keeps the latest snapshot per domain, clique and node aspect.
"""

from __future__ import annotations

from nats.js import JetStreamContext, api
from nats.js.errors import BadRequestError, NotFoundError
from nats.js.kv import KeyValue

from shared.bus.settings import NatsSettings
from shared.events.subjects import ALL_EVENTS

DUPLICATE_WINDOW_S = 120.0


def stream_config(settings: NatsSettings) -> api.StreamConfig:
    """The desired event stream (pure)."""
    return api.StreamConfig(
        name=settings.stream,
        description="cdo events (CloudEvents, binary mode)",
        subjects=[ALL_EVENTS],
        retention=api.RetentionPolicy.LIMITS,
        storage=api.StorageType.FILE
        if settings.stream_storage == "file"
        else api.StorageType.MEMORY,
        max_age=settings.stream_max_age_s,
        max_bytes=settings.stream_max_bytes,
        num_replicas=settings.stream_replicas,
        duplicate_window=DUPLICATE_WINDOW_S,
        discard=api.DiscardPolicy.OLD,
    )


async def ensure_stream(js: JetStreamContext, settings: NatsSettings) -> api.StreamInfo:
    """Create the event stream, or bring an existing one to the desired config."""
    config = stream_config(settings)
    try:
        await js.stream_info(settings.stream)
    except NotFoundError:
        return await js.add_stream(config)
    return await js.update_stream(config)


async def has_stream(js: JetStreamContext, settings: NatsSettings) -> bool:
    """Whether the event stream is there (False also when its info may not be read)."""
    try:
        await js.stream_info(settings.stream)
    except Exception:  # not found, or no permission to ask: the same to the publisher
        return False
    return True


async def ensure_bucket(js: JetStreamContext, settings: NatsSettings) -> KeyValue:
    """Create the snapshot bucket if missing and bind to it."""
    try:
        return await js.key_value(settings.snapshot_bucket)
    except (NotFoundError, BadRequestError):
        pass
    storage = api.StorageType.FILE if settings.stream_storage == "file" else api.StorageType.MEMORY
    return await js.create_key_value(
        bucket=settings.snapshot_bucket,
        description="latest cdo snapshot per domain, clique and node aspect",
        history=1,
        storage=storage,
        replicas=settings.stream_replicas,
    )
