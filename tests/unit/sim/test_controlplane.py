"""The control plane's pure parts: restart backoff and each service's environment."""

from __future__ import annotations

from pathlib import Path

from sim.controlplane import (
    RESTART_BACKOFF_INITIAL_S,
    RESTART_BACKOFF_MAX_S,
    RESTART_BACKOFF_RESET_S,
    restart_delay,
    service_env,
)


def test_a_crash_loop_backs_off_doubling_up_to_the_cap() -> None:
    delays = []
    delay = 0.0
    for _ in range(8):
        delay = restart_delay(delay, ran_s=1.0)
        delays.append(delay)
    assert delays[0] == RESTART_BACKOFF_INITIAL_S
    assert delays[1] == 2 * RESTART_BACKOFF_INITIAL_S
    assert max(delays) == RESTART_BACKOFF_MAX_S == delays[-1]


def test_a_long_run_resets_the_backoff() -> None:
    assert restart_delay(RESTART_BACKOFF_MAX_S, ran_s=RESTART_BACKOFF_RESET_S) == (
        RESTART_BACKOFF_INITIAL_S
    )


def test_a_service_gets_its_own_prefixed_settings_and_the_runtime_ones() -> None:
    env = service_env(
        prefix="CDO_CLIQUE_ALLOCATOR_",
        name="clique-allocator",
        kubeconfig="/state/kubeconfig",
        http_port=8123,
        extra={"WEBHOOK_PORT": "9443"},
    )
    assert env["CDO_HTTP_PORT"] == "8123"
    assert env["CDO_INSTANCE"] == "clique-allocator-0"
    assert env["CDO_CLIQUE_ALLOCATOR_KUBECONFIG"] == "/state/kubeconfig"
    assert env["CDO_CLIQUE_ALLOCATOR_LEASE_NAMESPACE"] == "cdo-system"
    assert env["CDO_CLIQUE_ALLOCATOR_WEBHOOK_PORT"] == "9443"
    assert env["CDO_CLIQUE_ALLOCATOR_LEADER_ELECTION_LEASE_DURATION_S"] == "15"


def test_with_nats_identities_a_service_connects_with_its_token_and_no_user() -> None:
    env = service_env(
        prefix="CDO_DOMAIN_CONTROLLER_",
        name="domain-controller",
        kubeconfig="/state/kubeconfig",
        http_port=8124,
        extra={},
        nats_token_file=Path("/state/identities/nats/cdo-domain-controller.token"),
    )
    assert env["CDO_NATS_TOKEN_FILE"] == "/state/identities/nats/cdo-domain-controller.token"
    # Blank, so that a CDO_NATS_USER in the environment the control plane inherited is not used.
    assert env["CDO_NATS_USER"] == env["CDO_NATS_PASSWORD"] == ""
    without = service_env(
        prefix="CDO_DOMAIN_CONTROLLER_",
        name="domain-controller",
        kubeconfig="/state/kubeconfig",
        http_port=8124,
        extra={},
    )
    assert "CDO_NATS_TOKEN_FILE" not in without and "CDO_NATS_USER" not in without
