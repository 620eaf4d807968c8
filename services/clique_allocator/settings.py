"""Settings of the clique allocator, from CDO_CLIQUE_ALLOCATOR_* environment variables.

    python -m services.clique_allocator --settings     # every variable, default and meaning

The runtime's own CDO_* settings (NATS, probes, logging, tracing) come on top; see
docs/runtime.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from msgspec import Meta

from shared.kube.informer import InformerSettings
from shared.kube.leader import LeaderElectionSettings
from shared.kube.ratelimit import RateLimitSettings
from shared.settings import Settings, describe_settings, load_settings

ENV_PREFIX = "CDO_CLIQUE_ALLOCATOR_"


class WebhookSettings(Settings, frozen=True, kw_only=True):
    """The pod admission webhook every replica serves over HTTPS."""

    enabled: Annotated[
        bool, Meta(description="Serve the webhook (off: reconcile only, e.g. local runs).")
    ] = True
    host: Annotated[str, Meta(description="Address the webhook listens on.")] = "0.0.0.0"
    port: Annotated[
        int, Meta(description="Port the webhook listens on (0: any free port).", ge=0, le=65535)
    ] = 9443
    cert_file: Annotated[
        str, Meta(description="Serving certificate (PEM), e.g. from a mounted TLS Secret.")
    ] = "/etc/cdo/webhook-tls/tls.crt"
    key_file: Annotated[str, Meta(description="Private key of the serving certificate (PEM).")] = (
        "/etc/cdo/webhook-tls/tls.key"
    )
    reload_s: Annotated[
        float,
        Meta(
            description="Look for a renewed certificate this often (0: never); new connections "
            "use it, open ones keep theirs.",
            ge=0,
        ),
    ] = 60.0
    lookup_timeout_s: Annotated[
        float,
        Meta(
            description="Timeout of the API lookup made when a claim template is not in the "
            "cache yet; keep it well below the webhook's timeoutSeconds.",
            gt=0,
        ),
    ] = 2.0


class CliqueAllocatorSettings(Settings, frozen=True, kw_only=True):
    """How the allocator reaches the API, elects a leader, paces its work and serves its webhook."""

    kubeconfig: Annotated[
        str, Meta(description="Path of a kubeconfig; empty: the in-cluster service account.")
    ] = ""
    request_timeout_s: Annotated[float, Meta(description="Timeout of one API request.", gt=0)] = (
        30.0
    )
    lease_namespace: Annotated[
        str, Meta(description="Namespace of the leader-election Lease.", min_length=1)
    ] = "cdo-system"
    lease_name: Annotated[
        str, Meta(description="Name of the leader-election Lease.", min_length=1)
    ] = "cdo-clique-allocator"
    resync_s: Annotated[
        float,
        Meta(description="Look at every domain again this often, events or not (0: never).", ge=0),
    ] = 600.0
    retry_waiting_s: Annotated[
        float,
        Meta(
            description="Try a gang that could not be placed again after this long even if no "
            "change of capacity was seen (0: only on such changes).",
            ge=0,
        ),
    ] = 30.0
    field_manager: Annotated[
        str, Meta(description="fieldManager of the allocator's writes.", min_length=1)
    ] = "cdo-clique-allocator"
    workers: Annotated[
        int,
        Meta(
            description="Domains reconciled concurrently (never one domain twice); decisions "
            "are taken one at a time, pod writes run in parallel.",
            ge=1,
        ),
    ] = 8
    pod_writes: Annotated[
        int, Meta(description="Pod patches one reconcile sends at once.", ge=1)
    ] = 16
    reconcile_timeout_s: Annotated[
        float, Meta(description="Longest one reconcile may run before it is retried.", gt=0)
    ] = 60.0
    capacity_interval_s: Annotated[
        float,
        Meta(
            description="Gather capacity changes this long before publishing CliqueCapacity "
            "events, so a burst of placements publishes each clique's last state once.",
            ge=0,
        ),
    ] = 0.2
    webhook: WebhookSettings = WebhookSettings()
    leader_election: LeaderElectionSettings = LeaderElectionSettings()
    retries: RateLimitSettings = RateLimitSettings()
    informer: InformerSettings = InformerSettings()


def load(environ: Mapping[str, str] | None = None) -> CliqueAllocatorSettings:
    """Read the settings; ConfigError names the variable that is wrong."""
    return load_settings(CliqueAllocatorSettings, prefix=ENV_PREFIX, environ=environ)


def describe() -> str:
    """Every CDO_CLIQUE_ALLOCATOR_* variable with its default and meaning, one per line."""
    rows = describe_settings(CliqueAllocatorSettings, prefix=ENV_PREFIX)
    width = max(len(name) for name, _default, _doc in rows)
    return "\n".join(
        f"{name:<{width}}  {default or '(empty)':<10}  {doc}" for name, default, doc in rows
    )
