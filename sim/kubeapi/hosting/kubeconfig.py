"""The kubeconfig the emulator writes for kubectl and Kubernetes clients.

It carries the admin's static token; for an HTTPS server also the CA to trust (kubectl
sends no bearer token over plain HTTP).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml

from sim.kubeapi.auth.identity import ADMIN_TOKEN

CLUSTER = "cdo-sim"
USER = "cdo-sim-admin"
TOKEN = ADMIN_TOKEN


def kubeconfig(
    url: str, *, namespace: str = "default", ca_pem: bytes | None = None
) -> dict[str, Any]:
    cluster: dict[str, Any] = {"server": url}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CLUSTER, "cluster": cluster}],
        "users": [{"name": USER, "user": {"token": TOKEN}}],
        "contexts": [
            {"name": CLUSTER, "context": {"cluster": CLUSTER, "user": USER, "namespace": namespace}}
        ],
        "current-context": CLUSTER,
        "preferences": {},
    }


def write_kubeconfig(
    path: str | Path, url: str, *, namespace: str = "default", ca_pem: bytes | None = None
) -> Path:
    """Write a kubeconfig pointing at ``url`` (parent directories are created); ``ca_pem``
    is the CA of an HTTPS server's certificate."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    config = kubeconfig(url, namespace=namespace, ca_pem=ca_pem)
    target.write_text(yaml.safe_dump(config, sort_keys=False))
    return target
