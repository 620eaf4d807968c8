"""How a service reaches NATS and lays out JetStream, read from CDO_NATS_* variables; and the
same settings paced for a short-lived client (a command, the demo's event feed)."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlsplit

import msgspec
from msgspec import Meta

from shared.settings import Settings, load_settings


class NatsSettings(Settings, frozen=True, kw_only=True):
    """Connection to NATS and the JetStream objects cdo uses."""

    url: Annotated[str, Meta(description="NATS server URL(s), comma separated.")] = (
        "nats://127.0.0.1:4222"
    )
    user: Annotated[str, Meta(description="User name, when the server requires one.")] = ""
    password: Annotated[str, Meta(description="Password for the user.")] = ""
    creds_file: Annotated[str, Meta(description="NATS credentials (.creds) file.")] = ""
    token_file: Annotated[
        str,
        Meta(
            description="File holding a ServiceAccount token to authenticate with (auth "
            "callout), read again on every reconnect; instead of user and password."
        ),
    ] = ""
    tls_ca_file: Annotated[str, Meta(description="CA bundle that signs the server's cert.")] = ""
    tls_cert_file: Annotated[str, Meta(description="Client certificate for mutual TLS.")] = ""
    tls_key_file: Annotated[str, Meta(description="Key of the client certificate.")] = ""
    connect_timeout_s: Annotated[float, Meta(description="Timeout of one connect.", gt=0)] = 2.0
    reconnect_wait_s: Annotated[
        float,
        Meta(
            description="First pause between connect attempts; a service doubles it after "
            "each failed attempt, up to reconnect_max_wait_s.",
            gt=0,
        ),
    ] = 1.0
    reconnect_max_wait_s: Annotated[
        float,
        Meta(
            description="Longest pause between a service's connect attempts (it retries "
            "forever; its event feed is down meanwhile).",
            gt=0,
        ),
    ] = 30.0
    max_reconnect_attempts: Annotated[
        int,
        Meta(
            description="Connect attempts of a short-lived client (a command, a test's bus) "
            "before it gives up (-1: forever). A service never gives up.",
            ge=-1,
        ),
    ] = 600
    stream: Annotated[str, Meta(description="JetStream stream that keeps event history.")] = "CDO"
    # The stream's and the bucket's layout: what the NATS bootstrap creates them with. Services
    # only bind to them and run with whatever limits they have.
    stream_max_age_s: Annotated[
        float, Meta(description="How long the stream keeps events (NATS bootstrap).", gt=0)
    ] = 7 * 24 * 3600.0
    stream_max_bytes: Annotated[
        int, Meta(description="Size cap of the stream (NATS bootstrap).", gt=0)
    ] = 1 << 30
    stream_replicas: Annotated[
        int, Meta(description="Replicas of the stream and the bucket (NATS bootstrap).", ge=1, le=5)
    ] = 1
    stream_storage: Annotated[
        str, Meta(description="file | memory (NATS bootstrap).", pattern="^(file|memory)$")
    ] = "file"
    publish_ack_timeout_s: Annotated[
        float,
        Meta(
            description="Seconds an event waits for the stream's ack before it is sent again.",
            gt=0,
        ),
    ] = 2.0
    outbox_size: Annotated[
        int,
        Meta(
            description="Events awaiting the stream's ack kept for re-sending; when full, the "
            "oldest is dropped.",
            ge=1,
        ),
    ] = 10000
    snapshot_bucket: Annotated[
        str, Meta(description="KV bucket with the latest snapshot per entity.")
    ] = "cdo-snapshots"
    jetstream: Annotated[
        bool,
        Meta(
            description="Use the stream and the bucket; false for a connection in an account "
            "without JetStream (the NATS authenticator's)."
        ),
    ] = True


NATS_SCHEMES = ("nats", "tls", "ws", "wss")


def nats_url_problem(urls: str) -> str | None:
    """Why ``urls`` (comma separated, as CDO_NATS_URL holds them) cannot be connected to, or
    None; nats-py would fail on it only at connect time, deep in a retry loop."""
    parts = [part.strip() for part in urls.split(",") if part.strip()]
    if not parts:
        return "no URL given"
    for part in parts:
        parsed = urlsplit(part if "://" in part else f"nats://{part}")
        if parsed.scheme not in NATS_SCHEMES:
            return f"{part!r}: the scheme must be one of {', '.join(NATS_SCHEMES)}"
        try:
            port = parsed.port
        except ValueError:
            return f"{part!r}: the port must be a number from 1 to 65535"
        if not parsed.hostname or " " in part:
            return f"{part!r}: no host name"
        if port == 0:
            return f"{part!r}: the port must be a number from 1 to 65535"
    return None


def client_settings(url: str, *, reconnect_forever: bool = False) -> NatsSettings:
    """The CDO_NATS_* settings (stream and bucket names, credentials, TLS) with ``url`` and a
    client's own pacing: it fails fast unless it follows a stream.

    Raises ConfigError when a CDO_NATS_* variable is invalid.
    """
    base = load_settings(NatsSettings, prefix="CDO_NATS_")
    return msgspec.structs.replace(
        base,
        url=url,
        connect_timeout_s=2.0,
        reconnect_wait_s=0.5 if reconnect_forever else 0.2,
        # nats-py counts the first connection against the reconnect budget too: a budget of
        # one gives up on an unreachable server at once.
        max_reconnect_attempts=-1 if reconnect_forever else 1,
    )
