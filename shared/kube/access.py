"""Which API server a service talks to, found before it starts, as client-go controllers find it.

controller-runtime's ``config.GetConfig`` (what most Go controllers run with) takes the first of:

1. the service's own setting, ``CDO_<SERVICE>_KUBECONFIG`` (its ``--kubeconfig``): that one file;
2. ``KUBECONFIG``, when set: its files, merged (:mod:`shared.kube.kubeconfig`);
3. the pod's service account (``KUBERNETES_SERVICE_HOST``/``_PORT`` and the mounted token);
4. ``~/.kube/config``.

:func:`find_cluster` applies that order and answers a :class:`ClusterSource`, or raises
:class:`NoClusterError` whose message names what it looked at and the variable to set. Without
this the first sign of a missing kubeconfig would be kubernetes-asyncio's ``ConfigException:
Service host/port is not set.`` from deep inside the startup.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from shared.errors import CdoError
from shared.kube.kubeconfig import (
    KUBECONFIG_ENV,
    SERVICE_ACCOUNT_DIR,
    ClusterSource,
    env_paths,
    existing,
    home_kubeconfig,
    in_cluster,
    in_cluster_missing,
)


class NoClusterError(CdoError):
    """No API server to reach with these settings; the message says what to set."""


def find_cluster(
    kubeconfig: str,
    *,
    variable: str,
    environ: Mapping[str, str] | None = None,
    service_account_dir: Path = SERVICE_ACCOUNT_DIR,
) -> ClusterSource:
    """The cluster a service with setting ``variable`` = ``kubeconfig`` talks to (see above)."""
    environ = os.environ if environ is None else environ
    if kubeconfig:
        path = Path(kubeconfig)
        if not path.is_file():
            raise NoClusterError(f"{variable}={kubeconfig!r}: no such kubeconfig file")
        if not os.access(path, os.R_OK):
            raise NoClusterError(f"{variable}={kubeconfig!r}: the kubeconfig file is not readable")
        return ClusterSource(files=(path,), origin=variable)
    listed = environ.get(KUBECONFIG_ENV, "")
    if listed:
        files = existing(env_paths(listed))
        if not files:
            raise NoClusterError(
                f"{KUBECONFIG_ENV}={listed!r} names no kubeconfig file that exists: set "
                f"{variable} or {KUBECONFIG_ENV} to a kubeconfig file"
            )
        return ClusterSource(files=files, origin=f"${KUBECONFIG_ENV}")
    missing = in_cluster_missing(environ, service_account_dir=service_account_dir)
    if not missing:
        return in_cluster(environ, service_account_dir=service_account_dir)
    home = home_kubeconfig(environ)
    if home.is_file():
        return ClusterSource(files=(home,), origin="~/.kube/config")
    raise NoClusterError(
        f"{variable} is not set, {KUBECONFIG_ENV} is not set, this is not a pod with a service "
        f"account ({', '.join(missing)} missing) and {home} does not exist: set {variable} to "
        "a kubeconfig file"
    )
