"""Every workload deploy/ ships runs as a ServiceAccount of its own, without an API token where
no role is bound to it; the simulator applies exactly the base's identity objects."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from sim.control.natsauth import (
    AUTHENTICATOR,
    READER,
    AuthIdentities,
    CalloutKeys,
    authenticator_env,
)
from sim.identities import (
    IDENTITY_KINDS,
    NATS_AUTH_COMPONENT,
    SERVICE_ACCOUNTS,
    identity_objects,
)
from sim.identities import render_with as render_identities_with
from tests.integration.deploy.conftest import (
    KUSTOMIZE,
    OVERLAYS,
    Manifest,
    find,
    render,
    render_with,
    workloads,
)


def pod_spec(workload: Manifest) -> Manifest:
    spec: Manifest = workload["spec"]["template"]["spec"]
    return spec


def bound_accounts(objs: list[Manifest]) -> set[str]:
    return {
        subject["name"]
        for obj in objs
        if obj["kind"] in ("RoleBinding", "ClusterRoleBinding")
        for subject in obj["subjects"]
        if subject["kind"] == "ServiceAccount"
    }


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_workload_has_a_service_account_of_its_own(
    overlays: dict[str, list[Manifest]], overlay: str
) -> None:
    objs = overlays[overlay]
    accounts = {obj["metadata"]["name"]: obj for obj in objs if obj["kind"] == "ServiceAccount"}
    used: Counter[str] = Counter()
    for workload in workloads(objs):
        name = workload["metadata"]["name"]
        account = pod_spec(workload).get("serviceAccountName", "")
        assert account not in ("", "default"), f"{workload['kind']} {name} runs as default"
        assert account in accounts, f"{workload['kind']} {name}: no ServiceAccount {account}"
        used[account] += 1
    assert [a for a, n in used.items() if n > 1] == []
    assert set(accounts) == set(used), "a ServiceAccount no workload uses"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_workloads_without_roles_get_no_token(
    overlays: dict[str, list[Manifest]], overlay: str
) -> None:
    objs = overlays[overlay]
    bound = bound_accounts(objs)
    accounts = {obj["metadata"]["name"]: obj for obj in objs if obj["kind"] == "ServiceAccount"}
    for workload in workloads(objs):
        spec = pod_spec(workload)
        account = spec["serviceAccountName"]
        if account in bound:
            assert spec.get("automountServiceAccountToken", True) is True, account
        else:
            assert spec.get("automountServiceAccountToken") is False, account
            assert accounts[account].get("automountServiceAccountToken") is False, account


def test_nats_and_jaeger_run_as_their_own_accounts(overlays: dict[str, list[Manifest]]) -> None:
    names = {pod_spec(w)["serviceAccountName"] for w in workloads(overlays["dev"])}
    assert {"cdo-nats", "cdo-jaeger"} <= names


def test_the_simulator_applies_the_base_identities() -> None:
    objs = render(KUSTOMIZE / "base")
    chosen = identity_objects(objs)
    assert {obj["kind"] for obj in chosen} == set(IDENTITY_KINDS)
    assert chosen == sorted(chosen, key=lambda obj: list(IDENTITY_KINDS).index(obj["kind"]))
    assert len(chosen) == sum(1 for obj in objs if obj["kind"] in IDENTITY_KINDS)
    accounts = {obj["metadata"]["name"] for obj in chosen if obj["kind"] == "ServiceAccount"}
    assert set(SERVICE_ACCOUNTS) <= accounts
    assert set(SERVICE_ACCOUNTS) <= bound_accounts(chosen)


def test_the_simulator_takes_the_authenticator_from_the_component(tmp_path: Path) -> None:
    """``cdo sim up --nats-auth``: the authenticator's identity and settings are deploy/'s."""
    objs = render_with(tmp_path / "render", (NATS_AUTH_COMPONENT,))
    assert render_identities_with((NATS_AUTH_COMPONENT,)) == objs
    chosen = identity_objects(objs)
    accounts = {o["metadata"]["name"] for o in chosen if o["kind"] == "ServiceAccount"}
    assert {AUTHENTICATOR, *SERVICE_ACCOUNTS} <= accounts
    assert AUTHENTICATOR in bound_accounts(chosen)
    keys = CalloutKeys(seed_file=tmp_path / "issuer.seed", issuer="A", password="pw")
    prepared = AuthIdentities(
        kubeconfig=tmp_path / "auth.kubeconfig",
        reader_token_file=tmp_path / "reader.token",
        bootstrap_token_file=tmp_path / "bootstrap.token",
        deployment=find(objs, "Deployment", AUTHENTICATOR),
    )
    env = authenticator_env(prepared, keys, nats_url="nats://127.0.0.1:4222", http_port=8123)
    assert env["CDO_NATS_USER"] == "nats-auth"
    assert env["CDO_NATS_PASSWORD"] == "pw"
    assert env["CDO_NATS_JETSTREAM"] == "false"
    assert env["CDO_NATS_AUTH_ISSUER_SEED_FILE"] == str(tmp_path / "issuer.seed")
    assert env["CDO_NATS_AUTH_KUBECONFIG"] == str(tmp_path / "auth.kubeconfig")
    assert env["CDO_NATS_AUTH_NAMESPACE"] == "cdo-system"
    assert env["CDO_NATS_AUTH_READERS"] == READER
    assert env["CDO_HTTP_PORT"] == "8123"
