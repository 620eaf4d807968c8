"""Whether a service has an API server to reach: a kubeconfig file, or a pod's service account."""

from __future__ import annotations

from pathlib import Path

from shared.kube.access import kube_access_problem

VARIABLE = "CDO_X_KUBECONFIG"
IN_CLUSTER = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}


def test_a_kubeconfig_file_that_exists_is_enough(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    assert kube_access_problem(str(kubeconfig), variable=VARIABLE, environ={}) is None


def test_a_kubeconfig_that_is_not_there_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "config"
    assert kube_access_problem(str(missing), variable=VARIABLE, environ=IN_CLUSTER) == (
        f"{VARIABLE}='{missing}': no such kubeconfig file"
    )
    assert kube_access_problem(str(tmp_path), variable=VARIABLE, environ={}) == (
        f"{VARIABLE}='{tmp_path}': no such kubeconfig file"
    )


def test_in_a_pod_the_service_account_is_enough(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("a-token")
    assert kube_access_problem("", variable=VARIABLE, environ=IN_CLUSTER, token_file=token) is None


def test_outside_a_pod_without_a_kubeconfig_the_variable_is_named(tmp_path: Path) -> None:
    token = tmp_path / "token"
    problem = kube_access_problem("", variable=VARIABLE, environ={}, token_file=token)
    assert problem == (
        f"{VARIABLE} is not set and this is not a pod with a service account "
        f"(KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT missing): "
        f"set {VARIABLE} to a kubeconfig file"
    )
    # The service variables without the token file: still not a pod with a service account.
    problem = kube_access_problem("", variable=VARIABLE, environ=IN_CLUSTER, token_file=token)
    assert problem is not None and f"({token} missing)" in problem
