"""CDO_DOMAIN_CONTROLLER_* settings."""

from __future__ import annotations

import pytest

from services.domain_controller.settings import describe, load
from shared.errors import ConfigError


def test_defaults_and_nested_variables() -> None:
    settings = load({})
    assert (settings.loop.workers, settings.lease.namespace, settings.api.kubeconfig) == (
        16,
        "cdo-system",
        "",
    )
    tuned = load(
        {
            "CDO_DOMAIN_CONTROLLER_WORKERS": "4",
            "CDO_DOMAIN_CONTROLLER_LEADER_ELECTION_LEASE_DURATION_S": "2",
            "CDO_DOMAIN_CONTROLLER_INFORMER_PAGE_SIZE": "100",
        }
    )
    assert tuned.loop.workers == 4
    assert tuned.leader_election.lease_duration_s == 2.0
    assert tuned.informer.page_size == 100


def test_a_bad_value_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="CDO_DOMAIN_CONTROLLER_WORKERS='0'"):
        load({"CDO_DOMAIN_CONTROLLER_WORKERS": "0"})


def test_every_variable_is_described() -> None:
    lines = describe().splitlines()
    assert any(line.startswith("CDO_DOMAIN_CONTROLLER_RESYNC_S") for line in lines)
    assert all(len(line.split(None, 2)) == 3 for line in lines)
