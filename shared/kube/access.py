"""Whether a service has a Kubernetes API to reach, told before it starts.

Without this the first sign of a missing kubeconfig is kubernetes-asyncio's
``ConfigException: Service host/port is not set.`` from deep inside the startup; here the
answer names the variable to set.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

IN_CLUSTER_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
IN_CLUSTER_VARIABLES = ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")


def kube_access_problem(
    kubeconfig: str,
    *,
    variable: str,
    environ: Mapping[str, str] | None = None,
    token_file: Path = IN_CLUSTER_TOKEN,
) -> str | None:
    """Why the service cannot reach an API server with these settings, or None."""
    environ = os.environ if environ is None else environ
    if kubeconfig:
        path = Path(kubeconfig)
        if not path.is_file():
            return f"{variable}={kubeconfig!r}: no such kubeconfig file"
        if not os.access(path, os.R_OK):
            return f"{variable}={kubeconfig!r}: the kubeconfig file is not readable"
        return None
    missing = [name for name in IN_CLUSTER_VARIABLES if not environ.get(name)]
    if missing or not token_file.is_file():
        return (
            f"{variable} is not set and this is not a pod with a service account "
            f"({', '.join(missing) or token_file} missing): set {variable} to a kubeconfig file"
        )
    return None
