"""Settings of the clique allocator, from CDO_CLIQUE_ALLOCATOR_* environment variables.

    python -m services.clique_allocator --settings     # every variable, default and meaning

The runtime's own CDO_* settings (NATS, probes, logging, tracing) come on top; see
docs/runtime.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from msgspec import Meta

from services.clique_allocator.breaker.settings import BreakerSettings
from shared.crds.names import ALLOCATOR_USER
from shared.kube.settings import ApiSettings, ControllerSettings, LeaseSettings, LoopSettings
from shared.settings import INLINE, Settings, describe_table, load_settings

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


class CliqueAllocatorSettings(ControllerSettings, frozen=True, kw_only=True):
    """How the allocator reaches the API, elects a leader, paces its work and serves its webhook
    (the shared groups are shared/kube/settings.py's; the defaults here are the allocator's)."""

    api: Annotated[ApiSettings, INLINE] = ApiSettings(field_manager="cdo-clique-allocator")
    lease: LeaseSettings = LeaseSettings(name="cdo-clique-allocator")
    loop: Annotated[LoopSettings, INLINE] = LoopSettings(workers=8)
    retry_waiting_s: Annotated[
        float,
        Meta(
            description="Try a gang that could not be placed again after this long even if no "
            "change of capacity was seen (0: only on such changes).",
            ge=0,
        ),
    ] = 30.0
    pod_writes: Annotated[
        int, Meta(description="Pod patches one reconcile sends at once.", ge=1)
    ] = 16
    capacity_interval_s: Annotated[
        float,
        Meta(
            description="Gather capacity changes this long before publishing CliqueCapacity "
            "events, so a burst of placements publishes each clique's last state once.",
            ge=0,
        ),
    ] = 0.2
    user: Annotated[
        str,
        Meta(
            description="The Kubernetes user the allocator acts as "
            "(system:serviceaccount:<namespace>:<account>; deploy/ sets it from the pod's "
            "namespace): stamped on every Placement it writes (cdo.dev/written-by), where the "
            "cdo-placement-writer policy checks it and the IMEX agents look for it.",
            min_length=1,
        ),
    ] = ALLOCATOR_USER
    webhook: WebhookSettings = WebhookSettings()
    breaker: BreakerSettings = BreakerSettings()


def load(environ: Mapping[str, str] | None = None) -> CliqueAllocatorSettings:
    """Read the settings; ConfigError names the variable that is wrong."""
    return load_settings(CliqueAllocatorSettings, prefix=ENV_PREFIX, environ=environ)


def describe() -> str:
    """Every CDO_CLIQUE_ALLOCATOR_* variable with its default and meaning, one per line."""
    return describe_table(CliqueAllocatorSettings, prefix=ENV_PREFIX)
