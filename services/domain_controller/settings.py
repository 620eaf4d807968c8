"""Settings of the domain controller, from CDO_DOMAIN_CONTROLLER_* environment variables.

    python -m services.domain_controller --settings     # every variable, default and meaning

The runtime's own CDO_* settings (NATS, probes, logging, tracing) come on top; see
docs/runtime.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from msgspec import Meta

from shared.kube.settings import ApiSettings, ControllerSettings, LeaseSettings, LoopSettings
from shared.settings import INLINE, describe_table, load_settings

ENV_PREFIX = "CDO_DOMAIN_CONTROLLER_"


class DomainControllerSettings(ControllerSettings, frozen=True, kw_only=True):
    """How the domain controller reaches the API, elects a leader and paces its work (the
    groups are shared/kube/settings.py's; the defaults here are the domain controller's)."""

    namespace: Annotated[
        str, Meta(description="Watch ComputeDomains (and their pods) in this namespace only.")
    ] = ""
    api: Annotated[ApiSettings, INLINE] = ApiSettings(field_manager="cdo-domain-controller")
    lease: LeaseSettings = LeaseSettings(name="cdo-domain-controller")
    loop: Annotated[LoopSettings, INLINE] = LoopSettings(workers=16)


def load(environ: Mapping[str, str] | None = None) -> DomainControllerSettings:
    """Read the settings; ConfigError names the variable that is wrong."""
    return load_settings(DomainControllerSettings, prefix=ENV_PREFIX, environ=environ)


def describe() -> str:
    """Every CDO_DOMAIN_CONTROLLER_* variable with its default and meaning, one per line."""
    return describe_table(DomainControllerSettings, prefix=ENV_PREFIX)
