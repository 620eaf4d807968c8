"""``cdo`` as kubectl users expect it: the ``kubectl-cdo`` plugin that the real kubectl finds
on PATH, ``--version``, and a completion script that bash sources and completes with."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from shared.version import version
from tests.integration.cli.conftest import cdo, environment

BIN = Path(sys.executable).parent
KUBECTL = BIN / "kubectl"
PLUGIN = BIN / "kubectl-cdo"


def plugin_path(tmp_path: Path) -> dict[str, str]:
    """PATH with only the plugin and the shell tools: what kubectl finds is this one."""
    only = tmp_path / "bin"
    only.mkdir(exist_ok=True)
    link = only / "kubectl-cdo"
    if not link.exists():
        link.symlink_to(PLUGIN)
    return environment({"PATH": f"{only}{os.pathsep}/usr/bin{os.pathsep}/bin"})


def kubectl(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(KUBECTL), *args], capture_output=True, text=True, timeout=60, env=env, check=False
    )


@pytest.fixture
def installed() -> None:
    if not PLUGIN.exists() or not KUBECTL.exists():
        pytest.fail(f"{PLUGIN} or {KUBECTL} missing: run ./task to install the project")


def test_version() -> None:
    result = cdo("--version")
    assert (result.code, result.stdout) == (0, f"cdo {version()}\n")


def test_kubectl_runs_cdo_as_a_plugin(installed: None, tmp_path: Path) -> None:
    env = plugin_path(tmp_path)
    listed = kubectl("plugin", "list", env=env)
    assert str(tmp_path / "bin" / "kubectl-cdo") in listed.stdout, listed.stderr
    shown = kubectl("cdo", "--version", env=env)
    assert (shown.returncode, shown.stdout) == (0, f"cdo {version()}\n"), shown.stderr
    helped = kubectl("cdo", "explain", "--help", env=env)
    assert helped.returncode == 0
    assert helped.stdout.startswith("usage: kubectl cdo explain")
    wrong = kubectl("cdo", "top", "nodes", env=env)
    assert wrong.returncode == 2
    assert "kubectl cdo top: error: argument resource: invalid choice: 'nodes'" in wrong.stderr


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_prints_a_script(shell: str) -> None:
    result = cdo("completion", shell)
    assert result.code == 0
    assert "complete -o default -F _cdo_complete cdo kubectl-cdo" in result.stdout
    assert ("bashcompinit" in result.stdout) is (shell == "zsh")


def complete(script: Path, *words: str) -> list[str]:
    """What bash offers after ``words`` (the last one is the word being typed)."""
    line = " ".join(f"'{w}'" for w in words)
    program = (
        f"source {script}\n"
        f"COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}\n"
        "_cdo_complete\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(
        ["bash", "--norc", "-c", program], capture_output=True, text=True, timeout=30, check=True
    )
    return done.stdout.split()


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_sources_the_script_and_completes(tmp_path: Path) -> None:
    script = tmp_path / "cdo.bash"
    script.write_text(cdo("completion", "bash").stdout)
    registered = subprocess.run(
        ["bash", "--norc", "-c", f"source {script} && complete -p cdo kubectl-cdo"],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    assert "_cdo_complete cdo" in registered.stdout
    assert complete(script, "cdo", "ex") == ["explain"]
    assert complete(script, "cdo", "top", "") == [
        "--help", "--state-dir", "--kubeconfig", "--context", "--nats-url", "--verbose",
        "cliques", "--output", "--no-headers", "--watch",
    ]  # fmt: skip
    assert complete(script, "cdo", "status", "-o", "") == [
        "json", "yaml", "wide", "name", "jsonpath=", "custom-columns=",
    ]  # fmt: skip
    assert complete(script, "cdo", "sim", "fault", "n1", "--x") == ["--xid"]
    assert complete(script, "kubectl-cdo", "explain", "--all") == ["--all-namespaces"]
