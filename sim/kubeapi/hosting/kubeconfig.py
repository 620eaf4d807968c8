"""The kubeconfig the emulator writes for kubectl and Kubernetes clients."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from sim.kubeapi.auth.identity import ADMIN_TOKEN

CLUSTER = "cdo-sim"
USER = "cdo-sim-admin"
TOKEN = ADMIN_TOKEN


def kubeconfig(url: str, *, namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CLUSTER, "cluster": {"server": url}}],
        "users": [{"name": USER, "user": {"token": TOKEN}}],
        "contexts": [
            {"name": CLUSTER, "context": {"cluster": CLUSTER, "user": USER, "namespace": namespace}}
        ],
        "current-context": CLUSTER,
        "preferences": {},
    }


def write_kubeconfig(path: str | Path, url: str, *, namespace: str = "default") -> Path:
    """Write a kubeconfig pointing at ``url`` (parent directories are created)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(kubeconfig(url, namespace=namespace), sort_keys=False))
    return target
