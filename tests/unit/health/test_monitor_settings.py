"""The monitor's settings from CDO_HEALTH_* variables."""

from __future__ import annotations

import pytest

from services.health_monitor.settings import (
    describe,
    load_classifier,
    load_monitor_settings,
    load_service_settings,
)
from shared.errors import ConfigError


def test_defaults() -> None:
    settings = load_monitor_settings({})
    assert (settings.read_interval_s, settings.hold_down_s, settings.xid_latch_s) == (
        1.0,
        30.0,
        300.0,
    )
    assert (settings.event_burst, settings.event_rate_per_s) == (10, 0.2)


def test_values_from_the_environment() -> None:
    settings = load_monitor_settings(
        {
            "CDO_HEALTH_HOLD_DOWN_S": "2.5",
            "CDO_HEALTH_EVENT_BURST": "3",
            "CDO_HEALTH_KUBE_EVENTS": "false",
        }
    )
    assert (settings.hold_down_s, settings.event_burst, settings.kube_events) == (2.5, 3, False)


def test_the_node_name_is_required() -> None:
    with pytest.raises(ConfigError, match=r"^CDO_HEALTH_NODE_NAME: required, not set$"):
        load_service_settings({})
    with pytest.raises(ConfigError, match="CDO_HEALTH_NODE_NAME"):
        load_service_settings({"CDO_HEALTH_NODE_NAME": ""})
    assert load_service_settings({"CDO_HEALTH_NODE_NAME": "n1"}).node_name == "n1"


def test_a_bad_value_names_its_variable() -> None:
    with pytest.raises(ConfigError, match="CDO_HEALTH_READ_INTERVAL_S"):
        load_monitor_settings({"CDO_HEALTH_READ_INTERVAL_S": "0"})


def test_classification_overrides_share_the_prefix() -> None:
    classifier = load_classifier(
        {"CDO_HEALTH_XID_OVERRIDES": "79=warning", "CDO_HEALTH_HOLD_DOWN_S": "1"}
    )
    assert classifier.rules["xid.79"].severity == "warning"


def test_describe_lists_every_variable() -> None:
    text = describe()
    for name in ("CDO_HEALTH_NODE_NAME", "CDO_HEALTH_HOLD_DOWN_S", "CDO_HEALTH_XID_OVERRIDES"):
        assert name in text


def test_the_circuit_breaker_is_on_by_default() -> None:
    breaker = load_monitor_settings({}).breaker
    assert (breaker.enabled, breaker.claim_timeout_s) == (True, 30)


def test_breaker_settings_from_the_environment() -> None:
    breaker = load_monitor_settings(
        {"CDO_HEALTH_BREAKER_ENABLED": "false", "CDO_HEALTH_BREAKER_CLAIM_TIMEOUT_S": "10"}
    ).breaker
    assert (breaker.enabled, breaker.claim_timeout_s) == (False, 10)
    with pytest.raises(ConfigError, match="CDO_HEALTH_BREAKER_CLAIM_TIMEOUT_S"):
        load_monitor_settings({"CDO_HEALTH_BREAKER_CLAIM_TIMEOUT_S": "0"})
    assert "CDO_HEALTH_BREAKER_ENABLED" in describe()
    # The caps are the arbiter's, the clique allocator's settings.
    assert "CDO_HEALTH_BREAKER_CLIQUE_SHARE" not in describe()
