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
from shared.settings import INLINE, Settings, describe_table, load_settings

ENV_PREFIX = "CDO_DOMAIN_CONTROLLER_"


class ImexSignerSettings(Settings, frozen=True, kw_only=True):
    """The signer of the nodes' IMEX certificates (services/domain_controller/imexsigner.py)."""

    enabled: Annotated[
        bool,
        Meta(
            description="Approve, deny and sign the IMEX agents' CertificateSigningRequests "
            "(signer cdo.dev/imex) with the CA in Secret cdo-imex-ca of cdo's namespace (the "
            "lease namespace)."
        ),
    ] = False
    agent_service_account: Annotated[
        str,
        Meta(
            description="The IMEX agent's ServiceAccount in cdo's namespace: only its "
            "node-bound tokens may obtain a certificate.",
            min_length=1,
        ),
    ] = "cdo-imex-agent"
    lifetime_s: Annotated[
        float,
        Meta(
            description="Longest lifetime of an issued certificate. A revoked node keeps its "
            "certificate at most this long: keep it short (agents renew at two thirds).",
            gt=0,
        ),
    ] = 86400.0


class DomainControllerSettings(ControllerSettings, frozen=True, kw_only=True):
    """How the domain controller reaches the API, elects a leader and paces its work (the
    groups are shared/kube/settings.py's; the defaults here are the domain controller's)."""

    namespace: Annotated[
        str, Meta(description="Watch ComputeDomains (and their pods) in this namespace only.")
    ] = ""
    api: Annotated[ApiSettings, INLINE] = ApiSettings(field_manager="cdo-domain-controller")
    lease: LeaseSettings = LeaseSettings(name="cdo-domain-controller")
    loop: Annotated[LoopSettings, INLINE] = LoopSettings(workers=16)
    imex_signer: ImexSignerSettings = ImexSignerSettings()


def load(environ: Mapping[str, str] | None = None) -> DomainControllerSettings:
    """Read the settings; ConfigError names the variable that is wrong."""
    return load_settings(DomainControllerSettings, prefix=ENV_PREFIX, environ=environ)


def describe() -> str:
    """Every CDO_DOMAIN_CONTROLLER_* variable with its default and meaning, one per line."""
    return describe_table(DomainControllerSettings, prefix=ENV_PREFIX)
