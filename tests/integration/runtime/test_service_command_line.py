"""Each service's real command line: help and version without starting, unknown arguments and
settings that cannot work refused with one line naming what to set (exit 2), no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from shared.version import version

SERVICES = {
    "services.domain_controller": ("domain-controller", "CDO_DOMAIN_CONTROLLER_"),
    "services.clique_allocator": ("clique-allocator", "CDO_CLIQUE_ALLOCATOR_"),
    "services.imex_agent": ("imex-agent", "CDO_IMEX_AGENT_"),
    "services.health_monitor": ("health-monitor", "CDO_HEALTH_"),
    "services.nats_auth": ("nats-auth", "CDO_NATS_AUTH_"),
}
# The services whose settings above suffice to reach the API and NATS checks (the NATS
# authenticator needs its issuer key first: tests/unit/nats_auth).
REACHING_THE_CHECKS = [module for module in SERVICES if module != "services.nats_auth"]
# What the per-node services need before the API and NATS are looked at.
NODE_SETTINGS = {
    "CDO_IMEX_AGENT_NODE_NAME": "node-a",
    "CDO_IMEX_AGENT_ADDRESS": "10.0.0.1",
    "CDO_HEALTH_NODE_NAME": "node-a",
}


def run(
    module: str, *args: str, env: dict[str, str] | None = None, unset: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    clean = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("CDO_") and not key.startswith("KUBERNETES_") and key != "KUBECONFIG"
    }
    # No ~/.kube/config either: a home directory that does not exist.
    clean["HOME"] = "/nonexistent/cdo-test-home"
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        env={
            key: value
            for key, value in {**clean, **NODE_SETTINGS, **(env or {})}.items()
            if key not in unset
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.mark.parametrize("module", SERVICES)
def test_help_and_version_print_without_starting(module: str) -> None:
    component, prefix = SERVICES[module]
    helped = run(module, "--help")
    assert helped.returncode == 0, helped.stderr
    assert f"usage: python -m {module}" in helped.stdout
    assert "--settings" in helped.stdout and "--version" in helped.stdout
    assert helped.stderr == ""  # nothing started: no log line at all
    versioned = run(module, "--version")
    assert versioned.returncode == 0, versioned.stderr
    assert versioned.stdout.strip() == f"cdo {component} {version()}"
    listed = run(module, "--settings")
    assert listed.returncode == 0 and f"{prefix}KUBECONFIG" in listed.stdout


@pytest.mark.parametrize("module", SERVICES)
def test_an_unknown_argument_is_refused_with_the_usage(module: str) -> None:
    result = run(module, "--nodes", "3")
    assert result.returncode == 2
    assert "unrecognized arguments: --nodes 3" in result.stderr
    assert result.stderr.startswith("usage: ")


@pytest.mark.parametrize("module", REACHING_THE_CHECKS)
def test_no_api_server_outside_a_cluster_names_the_kubeconfig_variable(module: str) -> None:
    component, prefix = SERVICES[module]
    line = one_line(run(module))
    assert line.startswith(f"{component}: no Kubernetes API: {prefix}KUBECONFIG is not set")
    assert f"set {prefix}KUBECONFIG to a kubeconfig file" in line


@pytest.mark.parametrize("module", REACHING_THE_CHECKS)
def test_a_missing_kubeconfig_file_is_named(module: str, tmp_path: Path) -> None:
    component, prefix = SERVICES[module]
    missing = tmp_path / "kubeconfig"
    result = run(module, env={f"{prefix}KUBECONFIG": str(missing)})
    assert result.returncode == 2
    assert one_line(result) == (
        f"{component}: no Kubernetes API: {prefix}KUBECONFIG='{missing}': no such kubeconfig file"
    )


@pytest.mark.parametrize("module", REACHING_THE_CHECKS)
def test_a_nats_url_that_cannot_work_is_named(module: str, tmp_path: Path) -> None:
    # Every way a URL can be wrong: tests/unit/bus/test_nats_url.py.
    component, prefix = SERVICES[module]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    result = run(module, env={f"{prefix}KUBECONFIG": str(kubeconfig), "CDO_NATS_URL": "not a url"})
    assert result.returncode == 2
    assert one_line(result) == (
        f"{component}: invalid setting CDO_NATS_URL: 'not a url': no host name"
    )


def test_a_missing_required_setting_names_its_variable() -> None:
    result = run("services.imex_agent", unset=("CDO_IMEX_AGENT_NODE_NAME",))
    assert result.returncode == 2
    assert one_line(result) == (
        "imex-agent: invalid setting CDO_IMEX_AGENT_NODE_NAME: required, not set"
    )
