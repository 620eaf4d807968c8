"""Which API server a service finds, in controller-runtime's order: its own setting, KUBECONFIG,
the pod's service account, ~/.kube/config; and one line naming what to set when there is none."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from shared.kube.access import NoClusterError, find_cluster

VARIABLE = "CDO_X_KUBECONFIG"
IN_CLUSTER = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}


@pytest.fixture
def account(tmp_path: Path) -> Path:
    """A service account directory with its token."""
    directory = tmp_path / "serviceaccount"
    directory.mkdir()
    (directory / "token").write_text("a-token")
    return directory


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home directory with ~/.kube/config."""
    directory = tmp_path / "home"
    (directory / ".kube").mkdir(parents=True)
    (directory / ".kube" / "config").write_text("apiVersion: v1\nkind: Config\n")
    return directory


def kubeconfig(path: Path) -> Path:
    path.write_text("apiVersion: v1\nkind: Config\n")
    return path


def test_the_setting_comes_first(tmp_path: Path, account: Path, home: Path) -> None:
    own = kubeconfig(tmp_path / "own")
    other = kubeconfig(tmp_path / "other")
    environ = {**IN_CLUSTER, "KUBECONFIG": str(other), "HOME": str(home)}
    source = find_cluster(str(own), variable=VARIABLE, environ=environ, service_account_dir=account)
    assert (source.files, source.origin) == ((own,), VARIABLE)


def test_then_kubeconfig_merged_then_the_pod_then_home(
    tmp_path: Path, account: Path, home: Path
) -> None:
    first, second = kubeconfig(tmp_path / "first"), kubeconfig(tmp_path / "second")
    listed = os.pathsep.join([str(tmp_path / "gone"), str(first), str(second)])
    environ = {**IN_CLUSTER, "KUBECONFIG": listed, "HOME": str(home)}
    source = find_cluster("", variable=VARIABLE, environ=environ, service_account_dir=account)
    assert (source.files, source.origin) == ((first, second), "$KUBECONFIG")

    environ = {**IN_CLUSTER, "HOME": str(home)}
    source = find_cluster("", variable=VARIABLE, environ=environ, service_account_dir=account)
    assert source.in_cluster and source.service_account_dir == account

    source = find_cluster(
        "", variable=VARIABLE, environ={"HOME": str(home)}, service_account_dir=account
    )
    assert (source.files, source.origin) == ((home / ".kube" / "config",), "~/.kube/config")


def test_a_kubeconfig_setting_that_is_not_there_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "config"
    for given in (missing, tmp_path):
        with pytest.raises(NoClusterError) as raised:
            find_cluster(str(given), variable=VARIABLE, environ=IN_CLUSTER)
        assert str(raised.value) == f"{VARIABLE}='{given}': no such kubeconfig file"


def test_a_kubeconfig_list_without_a_file_is_named(tmp_path: Path, account: Path) -> None:
    listed = str(tmp_path / "nothing")
    with pytest.raises(NoClusterError, match=f"KUBECONFIG='{listed}' names no kubeconfig file"):
        find_cluster("", variable=VARIABLE, environ={**IN_CLUSTER, "KUBECONFIG": listed},
                     service_account_dir=account)  # fmt: skip


def test_without_anything_the_variable_is_named(tmp_path: Path) -> None:
    account = tmp_path / "serviceaccount"
    with pytest.raises(NoClusterError) as raised:
        find_cluster(
            "", variable=VARIABLE, environ={"HOME": str(tmp_path)}, service_account_dir=account
        )
    assert str(raised.value) == (
        f"{VARIABLE} is not set, KUBECONFIG is not set, this is not a pod with a service account "
        f"(KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT, {account / 'token'} missing) and "
        f"{tmp_path / '.kube' / 'config'} does not exist: set {VARIABLE} to a kubeconfig file"
    )
    # The service variables without the token file: still not a pod with a service account.
    with pytest.raises(NoClusterError, match=f"\\({account / 'token'} missing\\)"):
        find_cluster("", variable=VARIABLE, environ={**IN_CLUSTER, "HOME": str(tmp_path)},
                     service_account_dir=account)  # fmt: skip
