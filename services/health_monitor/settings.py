"""Settings of health classification, read from CDO_HEALTH_* environment variables."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from msgspec import Meta

from services.health_monitor.classification import DEFAULT_RULES, Classifier
from services.health_monitor.overrides import (
    apply_overrides,
    parse_signal_overrides,
    parse_xid_overrides,
)
from shared.settings import Settings, env_name, load_settings

ENV_PREFIX = "CDO_HEALTH_"


class ClassificationSettings(Settings, frozen=True, kw_only=True):
    xid_overrides: Annotated[
        tuple[str, ...],
        Meta(
            description="XID classification overrides, XID[-LAST]=ignore|SEVERITY[:ACTION], "
            "e.g. 79=warning:reset_gpu,13=ignore"
        ),
    ] = ()
    signal_overrides: Annotated[
        tuple[str, ...],
        Meta(
            description="classification overrides for other rules, RULE=ignore|SEVERITY[:ACTION]"
            ", e.g. nvlink.down=fatal,nvml.unavailable=warning:none"
        ),
    ] = ()


def classifier_from_settings(
    settings: ClassificationSettings, *, prefix: str = ENV_PREFIX
) -> Classifier:
    """The default table with the settings' overrides (XID entries first, then signals)."""
    xid = parse_xid_overrides(settings.xid_overrides, variable=env_name(prefix, ("xid_overrides",)))
    signal = parse_signal_overrides(
        settings.signal_overrides,
        variable=env_name(prefix, ("signal_overrides",)),
        known=DEFAULT_RULES,
    )
    return Classifier(apply_overrides(DEFAULT_RULES, {**xid, **signal}))


def load_classifier(
    environ: Mapping[str, str] | None = None, *, prefix: str = ENV_PREFIX
) -> Classifier:
    """Read ClassificationSettings from the environment and build the classifier."""
    settings = load_settings(ClassificationSettings, prefix=prefix, environ=environ)
    return classifier_from_settings(settings, prefix=prefix)
