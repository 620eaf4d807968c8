"""Settings of the NATS authenticator, from CDO_NATS_AUTH_* environment variables.

    python -m services.nats_auth --settings     # every variable, default and meaning

The runtime's own CDO_* settings come on top (docs/runtime.md): CDO_NATS_USER and
CDO_NATS_PASSWORD are the callout user's (one of the server's ``auth_users``), and
CDO_NATS_JETSTREAM must be false (that user's account has no JetStream). CDO_NATS_STREAM and
CDO_NATS_SNAPSHOT_BUCKET name the stream and bucket the permissions are about.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from msgspec import Meta

from shared.kube.settings import ApiSettings, KubeAccessSettings
from shared.settings import INLINE, describe_table, load_settings

ENV_PREFIX = "CDO_NATS_AUTH_"


class NatsAuthSettings(KubeAccessSettings, frozen=True, kw_only=True):
    """What the authenticator checks tokens against and which users it issues."""

    api: Annotated[ApiSettings, INLINE] = ApiSettings(field_manager="cdo-nats-auth")
    issuer_seed_file: Annotated[
        str,
        Meta(
            description="File with the issuer account's nkey seed (SA...); its public key is "
            "the auth_callout issuer in the server's configuration.",
            min_length=1,
        ),
    ] = "/etc/cdo-nats-auth/issuer.seed"
    namespace: Annotated[
        str, Meta(description="cdo's namespace, where the services' ServiceAccounts are.")
    ] = "cdo-system"
    audience: Annotated[
        str, Meta(description="Audience the services' tokens are requested for.", min_length=1)
    ] = "nats"
    account: Annotated[
        str, Meta(description="NATS account the authorized users are placed in.", min_length=1)
    ] = "CDO"
    readers: Annotated[
        tuple[str, ...],
        Meta(
            description="Reader ServiceAccounts (subscribe and consume, publish nothing), "
            "NAMESPACE/NAME or NAMESPACE/* for all of a namespace."
        ),
    ] = ()
    max_user_lifetime_s: Annotated[
        int,
        Meta(
            description="Longest life of an issued user (never past its token's expiry); the "
            "server disconnects it then and the client reconnects with its current token.",
            gt=0,
        ),
    ] = 3600
    workers: Annotated[
        int, Meta(description="Authorization requests answered at once.", ge=1, le=1024)
    ] = 32
    queue_size: Annotated[
        int,
        Meta(description="Requests waiting for a worker; beyond that they are dropped.", ge=1),
    ] = 4096


def load(environ: Mapping[str, str] | None = None) -> NatsAuthSettings:
    """Read the settings; ConfigError names the variable that is wrong."""
    return load_settings(NatsAuthSettings, prefix=ENV_PREFIX, environ=environ)


def describe() -> str:
    """Every CDO_NATS_AUTH_* variable with its default and meaning, one per line."""
    return describe_table(NatsAuthSettings, prefix=ENV_PREFIX)
