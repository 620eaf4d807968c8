"""The JetStream objects cdo relies on: what the NATS bootstrap makes, what a service binds to.

- stream ``CDO`` (configurable) captures ``cdo.v1.>``: the replayable event history, with a
  duplicate window so a re-sent ``Nats-Msg-Id`` is stored once;
- KV bucket ``cdo-snapshots`` keeps the latest snapshot per domain, clique and node aspect.

Administration is apart from publishing: :func:`set_up` (the NATS bootstrap, a one-shot
identity: ``python -m services.nats_bootstrap``) creates both or brings them to the desired
layout; a service only looks them up (:func:`has_stream`, :func:`bound_bucket`) and runs with
whatever limits they have. NATS refuses a service's identity anything more
(services/nats_auth/permissions.py, and the static users of deploy's auth.conf).
"""

from __future__ import annotations

from dataclasses import dataclass

from nats.js import JetStreamContext, api
from nats.js.errors import BadRequestError, NotFoundError
from nats.js.kv import KeyValue

from shared.bus.settings import NatsSettings
from shared.events.subjects import ALL_EVENTS

DUPLICATE_WINDOW_S = 120.0
BUCKET_DESCRIPTION = "latest cdo snapshot per domain, clique and node aspect"
BUCKET_HISTORY = 1


def _storage(settings: NatsSettings) -> api.StorageType:
    return api.StorageType.FILE if settings.stream_storage == "file" else api.StorageType.MEMORY


def stream_config(settings: NatsSettings) -> api.StreamConfig:
    """The desired event stream (pure)."""
    return api.StreamConfig(
        name=settings.stream,
        description="cdo events (CloudEvents, binary mode)",
        subjects=[ALL_EVENTS],
        retention=api.RetentionPolicy.LIMITS,
        storage=_storage(settings),
        max_age=settings.stream_max_age_s,
        max_bytes=settings.stream_max_bytes,
        num_replicas=settings.stream_replicas,
        duplicate_window=DUPLICATE_WINDOW_S,
        discard=api.DiscardPolicy.OLD,
    )


def bucket_update(current: api.StreamConfig, settings: NatsSettings) -> api.StreamConfig | None:
    """The bucket's stream config with what differs from the desired layout changed, or None
    when nothing does (pure). Only what JetStream lets a stream change: the storage type of an
    existing bucket stays."""
    wanted = {
        "description": BUCKET_DESCRIPTION,
        "num_replicas": settings.stream_replicas,
        "max_msgs_per_subject": BUCKET_HISTORY,
    }
    if all(getattr(current, field) == value for field, value in wanted.items()):
        return None
    return current.evolve(**wanted)


@dataclass(frozen=True, slots=True)
class SetUp:
    """What :func:`set_up` did to each object: ``created``, ``updated`` or ``kept``."""

    stream: str
    bucket: str


async def ensure_stream(js: JetStreamContext, settings: NatsSettings) -> str:
    """Create the event stream, or bring an existing one to the desired config."""
    config = stream_config(settings)
    try:
        info = await js.stream_info(settings.stream)
    except NotFoundError:
        await js.add_stream(config)
        return "created"
    if _same_stream(info.config, config):
        return "kept"
    await js.update_stream(config)
    return "updated"


def _same_stream(current: api.StreamConfig, wanted: api.StreamConfig) -> bool:
    fields = (
        "description",
        "subjects",
        "max_age",
        "max_bytes",
        "num_replicas",
        "duplicate_window",
        "discard",
    )
    return all(getattr(current, field) == getattr(wanted, field) for field in fields)


async def ensure_bucket(js: JetStreamContext, settings: NatsSettings) -> str:
    """Create the snapshot bucket, or bring an existing one to the desired layout."""
    stream = f"KV_{settings.snapshot_bucket}"
    try:
        info = await js.stream_info(stream)
    except NotFoundError:
        await js.create_key_value(
            bucket=settings.snapshot_bucket,
            description=BUCKET_DESCRIPTION,
            history=BUCKET_HISTORY,
            storage=_storage(settings),
            replicas=settings.stream_replicas,
        )
        return "created"
    changed = bucket_update(info.config, settings)
    if changed is None:
        return "kept"
    await js.update_stream(changed)
    return "updated"


async def set_up(js: JetStreamContext, settings: NatsSettings) -> SetUp:
    """The NATS bootstrap's whole job: the stream and the bucket as the settings lay them out
    (idempotent; needs the administration rights no service has)."""
    return SetUp(stream=await ensure_stream(js, settings), bucket=await ensure_bucket(js, settings))


async def has_stream(js: JetStreamContext, settings: NatsSettings) -> bool:
    """Whether the event stream is there (False also when its info may not be read)."""
    try:
        await js.stream_info(settings.stream)
    except Exception:  # not found, or no permission to ask: the same to the publisher
        return False
    return True


async def bound_bucket(js: JetStreamContext, settings: NatsSettings) -> KeyValue | None:
    """The snapshot bucket, or None when it is not there (yet)."""
    try:
        return await js.key_value(settings.snapshot_bucket)
    except (NotFoundError, BadRequestError):
        return None
