"""The layout the NATS bootstrap gives the stream and the bucket (pure)."""

from __future__ import annotations

from nats.js import api

from shared.bus import NatsSettings
from shared.bus.jetstream import BUCKET_DESCRIPTION, bucket_update, stream_config


def bucket(**changes: object) -> api.StreamConfig:
    """A bucket's stream config as nats-py's create_key_value makes it."""
    base = api.StreamConfig(
        name="KV_cdo-snapshots",
        description=BUCKET_DESCRIPTION,
        subjects=["$KV.cdo-snapshots.>"],
        max_msgs_per_subject=1,
        num_replicas=1,
        allow_rollup_hdrs=True,
        deny_delete=True,
    )
    return base.evolve(**changes)


def test_the_stream_keeps_every_event_subject_with_the_settings_limits() -> None:
    config = stream_config(NatsSettings(stream="EV", stream_max_age_s=60.0, stream_replicas=3))
    assert (config.name, config.subjects, config.max_age) == ("EV", ["cdo.v1.>"], 60.0)
    assert config.num_replicas == 3
    assert config.discard == api.DiscardPolicy.OLD


def test_a_bucket_of_the_desired_layout_is_kept() -> None:
    assert bucket_update(bucket(), NatsSettings()) is None


def test_a_bucket_of_another_layout_is_updated_keeping_what_kv_needs() -> None:
    changed = bucket_update(bucket(num_replicas=1), NatsSettings(stream_replicas=3))
    assert changed is not None
    assert changed.num_replicas == 3
    # What makes it a KV bucket stays as the server has it.
    assert (changed.subjects, changed.allow_rollup_hdrs, changed.deny_delete) == (
        ["$KV.cdo-snapshots.>"],
        True,
        True,
    )
    stale = bucket_update(bucket(max_msgs_per_subject=5, description="old"), NatsSettings())
    assert stale is not None
    assert (stale.max_msgs_per_subject, stale.description) == (1, BUCKET_DESCRIPTION)
