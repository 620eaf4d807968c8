"""Settings of the domain controller, from CDO_DOMAIN_CONTROLLER_* environment variables.

    python -m services.domain_controller --settings     # every variable, default and meaning

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

ENV_PREFIX = "CDO_DOMAIN_CONTROLLER_"


class DomainControllerSettings(Settings, frozen=True, kw_only=True):
    """How the domain controller reaches the API, elects a leader and paces its work."""

    kubeconfig: Annotated[
        str, Meta(description="Path of a kubeconfig; empty: the in-cluster service account.")
    ] = ""
    namespace: Annotated[
        str, Meta(description="Watch ComputeDomains (and their pods) in this namespace only.")
    ] = ""
    request_timeout_s: Annotated[float, Meta(description="Timeout of one API request.", gt=0)] = (
        30.0
    )
    lease_namespace: Annotated[
        str, Meta(description="Namespace of the leader-election Lease.", min_length=1)
    ] = "cdo-system"
    lease_name: Annotated[
        str, Meta(description="Name of the leader-election Lease.", min_length=1)
    ] = "cdo-domain-controller"
    resync_s: Annotated[
        float,
        Meta(description="Look at every domain again this often, events or not (0: never).", ge=0),
    ] = 600.0
    field_manager: Annotated[
        str, Meta(description="fieldManager of the controller's writes.", min_length=1)
    ] = "cdo-domain-controller"
    workers: Annotated[
        int,
        Meta(
            description="Domains reconciled concurrently (never one domain twice); a reconcile "
            "mostly waits for the API, so more workers than cores pays.",
            ge=1,
        ),
    ] = 16
    reconcile_timeout_s: Annotated[
        float, Meta(description="Longest one reconcile may run before it is retried.", gt=0)
    ] = 60.0
    leader_election: LeaderElectionSettings = LeaderElectionSettings()
    retries: RateLimitSettings = RateLimitSettings()
    informer: InformerSettings = InformerSettings()


def load(environ: Mapping[str, str] | None = None) -> DomainControllerSettings:
    """Read the settings; ConfigError names the variable that is wrong."""
    return load_settings(DomainControllerSettings, prefix=ENV_PREFIX, environ=environ)


def describe() -> str:
    """Every CDO_DOMAIN_CONTROLLER_* variable with its default and meaning, one per line."""
    rows = describe_settings(DomainControllerSettings, prefix=ENV_PREFIX)
    width = max(len(name) for name, _default, _doc in rows)
    return "\n".join(
        f"{name:<{width}}  {default or '(empty)':<10}  {doc}" for name, default, doc in rows
    )
