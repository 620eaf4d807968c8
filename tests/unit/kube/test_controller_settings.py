"""ControllerSettings: grouped in code, flat in the environment where the variables were flat."""

from __future__ import annotations

from typing import Annotated

import pytest

from shared.errors import ConfigError
from shared.kube.settings import ApiSettings, ControllerSettings, LeaseSettings
from shared.settings import INLINE, describe_settings, load_settings


class Mine(ControllerSettings, frozen=True, kw_only=True):
    api: Annotated[ApiSettings, INLINE] = ApiSettings(field_manager="mine")
    lease: LeaseSettings = LeaseSettings(name="mine")


def test_inline_groups_read_the_variables_without_their_name() -> None:
    settings = load_settings(
        Mine,
        prefix="T_",
        environ={
            "T_KUBECONFIG": "/k",
            "T_WORKERS": "3",
            "T_LEASE_NAMESPACE": "ns",
            "T_LEADER_ELECTION_RETRY_PERIOD_S": "1",
            "T_RETRIES_BACKOFF_MAX_S": "2",
        },
    )
    assert (settings.api.kubeconfig, settings.kubeconfig) == ("/k", "/k")
    assert settings.api.field_manager == "mine"  # the subclass's default, under a variable
    assert (settings.lease.namespace, settings.lease.name) == ("ns", "mine")
    assert settings.loop.workers == 3
    assert settings.leader_election.retry_period_s == 1.0
    assert settings.retries.backoff_max_s == 2.0


def test_a_bad_inline_value_names_its_variable() -> None:
    with pytest.raises(ConfigError, match="T_WORKERS='0'"):
        load_settings(Mine, prefix="T_", environ={"T_WORKERS": "0"})


def test_describe_shows_the_variables_and_the_subclass_defaults() -> None:
    rows = {name: default for name, default, _doc in describe_settings(Mine, prefix="T_")}
    assert rows["T_FIELD_MANAGER"] == "'mine'"
    assert rows["T_LEASE_NAME"] == "'mine'"
    assert "T_REQUEST_TIMEOUT_S" in rows and "T_RESYNC_S" in rows
    assert not any(name.startswith(("T_API_", "T_LOOP_")) for name in rows)
