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
