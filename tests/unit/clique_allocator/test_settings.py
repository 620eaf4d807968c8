"""The allocator's settings from CDO_CLIQUE_ALLOCATOR_* variables."""

from __future__ import annotations

import pytest

from services.clique_allocator.settings import describe, load
from shared.errors import ConfigError


def test_defaults() -> None:
    settings = load({})
    assert settings.webhook.port == 9443
    assert settings.webhook.cert_file.endswith("tls.crt")
    assert settings.lease.name == "cdo-clique-allocator"
    assert settings.lease.namespace == "cdo-system"


def test_variables_override_nested_settings() -> None:
    settings = load(
        {
            "CDO_CLIQUE_ALLOCATOR_WEBHOOK_PORT": "8443",
            "CDO_CLIQUE_ALLOCATOR_WEBHOOK_KEY_FILE": "/tls/key.pem",
            "CDO_CLIQUE_ALLOCATOR_WORKERS": "3",
            "CDO_CLIQUE_ALLOCATOR_LEADER_ELECTION_LEASE_DURATION_S": "5",
        }
    )
    assert (settings.webhook.port, settings.webhook.key_file) == (8443, "/tls/key.pem")
    assert settings.loop.workers == 3
    assert settings.leader_election.lease_duration_s == 5


def test_a_bad_value_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="CDO_CLIQUE_ALLOCATOR_WEBHOOK_PORT"):
        load({"CDO_CLIQUE_ALLOCATOR_WEBHOOK_PORT": "70000"})


def test_describe_lists_every_variable() -> None:
    text = describe()
    assert "CDO_CLIQUE_ALLOCATOR_WEBHOOK_CERT_FILE" in text
    assert "CDO_CLIQUE_ALLOCATOR_LEASE_NAMESPACE" in text


def test_the_circuit_breakers_caps() -> None:
    breaker = load({}).breaker
    assert (breaker.clique_share, breaker.cluster_share, breaker.min_nodes) == (0.25, 0.1, 1)
    assert (breaker.window_s, breaker.claim_timeout_s, breaker.node_selector) == (600, 30, "")
    changed = load(
        {
            "CDO_CLIQUE_ALLOCATOR_BREAKER_CLIQUE_SHARE": "0.5",
            "CDO_CLIQUE_ALLOCATOR_BREAKER_WINDOW_S": "60",
            "CDO_CLIQUE_ALLOCATOR_BREAKER_NODE_SELECTOR": "nvidia.com/gpu.present=true",
        }
    ).breaker
    assert (changed.clique_share, changed.window_s) == (0.5, 60)
    assert changed.node_selector == "nvidia.com/gpu.present=true"
    with pytest.raises(ConfigError, match="CDO_CLIQUE_ALLOCATOR_BREAKER_CLUSTER_SHARE"):
        load({"CDO_CLIQUE_ALLOCATOR_BREAKER_CLUSTER_SHARE": "1.5"})
