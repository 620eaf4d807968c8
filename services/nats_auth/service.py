"""The authenticator wired into the runtime: its issuer key, its TokenReviews, its subscription.

The runtime's bus connection (the callout user's) carries the requests and the answers; the
API client makes the TokenReviews. The process is ready once it has subscribed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from services.nats_auth import settings as auth_settings
from services.nats_auth.callout import Authenticator, CalloutMetrics
from services.nats_auth.nkeyjwt import ACCOUNT, Signer
from services.nats_auth.permissions import Policy
from services.nats_auth.review import Reviewed, review
from services.nats_auth.settings import ENV_PREFIX, NatsAuthSettings
from shared.bus.settings import NatsSettings
from shared.errors import ConfigError
from shared.kube.client import KubeClient
from shared.runtime import ServiceContext
from shared.settings import env_name

COMPONENT = "nats-auth"
QUEUE = "cdo-nats-auth"
"""Replicas of the authenticator share the requests: each goes to one of them."""


def load_signer(settings: NatsAuthSettings) -> Signer:
    """The issuer account's key from its seed file; ConfigError naming the variable if bad."""
    variable = env_name(ENV_PREFIX, ("issuer_seed_file",))
    path = Path(settings.issuer_seed_file)
    try:
        seed = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{variable}: cannot read {path}: {exc.strerror}") from exc
    try:
        signer = Signer.from_seed(seed)
    except ValueError as exc:
        raise ConfigError(f"{variable}: {path} does not hold an nkey seed") from exc
    if not signer.public_key.startswith(ACCOUNT):
        raise ConfigError(f"{variable}: {path} holds a seed that is not an account's (SA...)")
    return signer


def load(environ: Mapping[str, str] | None = None) -> NatsAuthSettings:
    """The settings, with the issuer seed checked (ConfigError names the variable)."""
    settings = auth_settings.load(environ)
    load_signer(settings)
    return settings


def policy_of(settings: NatsAuthSettings, nats: NatsSettings) -> Policy:
    return Policy(
        namespace=settings.namespace,
        readers=settings.readers,
        stream=nats.stream,
        bucket=nats.snapshot_bucket,
    )


def authenticator(
    ctx: ServiceContext, client: KubeClient, settings: NatsAuthSettings
) -> Authenticator:
    async def reviewer(token: str) -> Reviewed:
        return await review(client, token, audience=settings.audience)

    return Authenticator(
        connection=ctx.bus.nc,
        reviewer=reviewer,
        signer=load_signer(settings),
        policy=policy_of(settings, ctx.settings.nats),
        account=settings.account,
        metrics=CalloutMetrics(ctx.metrics.registry),
        max_user_lifetime_s=settings.max_user_lifetime_s,
        workers=settings.workers,
        queue_size=settings.queue_size,
    )


def start(ctx: ServiceContext, client: KubeClient, settings: NatsAuthSettings) -> None:
    ctx.supervisor.on_shutdown("close kube client", client.close, phase="final")
    subscribed = [False]
    ctx.readiness.add("subscribed", lambda: subscribed[0])

    async def serve() -> None:
        # The authenticator is NATS's: unlike the other services it has nothing to do until
        # the runtime's bus is connected, and stays unready until then.
        await ctx.bus.wait_connected()
        auth = authenticator(ctx, client, settings)
        await ctx.bus.nc.subscribe(auth.subject, queue=QUEUE, cb=auth.receive)
        await ctx.bus.nc.flush()
        subscribed[0] = True
        await auth.run()

    ctx.supervisor.start("nats auth", serve())


__all__ = ["COMPONENT", "authenticator", "load", "load_signer", "policy_of", "start"]
