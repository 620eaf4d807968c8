"""A Kubernetes API server emulator over real HTTP, for tests and the simulated cluster.

Clients (kubernetes-asyncio, the official ``kubernetes`` client, ``kubectl``) talk to it as
to a real cluster; it keeps the behaviour controllers rely on: one global resourceVersion,
list/watch with resume and ``410 Expired``, selectors, optimistic concurrency, the status
subresource, finalizers and garbage collection, CRDs with schema and CEL validation,
patches and server-side apply, admission webhooks and ValidatingAdmissionPolicy, discovery
and OpenAPI. See docs/kubeapi.md for what is faithful and what is simplified.

In-process use (same event loop as the caller)::

    from sim.kubeapi import serve

    async with serve() as kube:              # free port on 127.0.0.1
        kube.url                             # "http://127.0.0.1:PORT"
        kube.kubeconfig                      # Path of a kubeconfig for clients and kubectl
        kube.store.rv                        # current resourceVersion
        kube.compact()                       # drop watch history: older RVs now 410
        kube.faults.expire_next_watch()      # next watch gets ERROR 410
        kube.faults.drop_watches()           # close open watch streams
        kube.faults.fail_next(2, code=429, retry_after=1)
        kube.faults.set_latency(0.05)

Synchronous code runs it in a thread: ``with ServerThread() as srv: srv.url, srv.kubeconfig``,
``srv.faults`` and ``srv.call(lambda api: api.store.compact())``.

Standalone: ``python -m sim.kubeapi --port 6443 --kubeconfig ./kubeconfig`` (``--kubernetes-version
1.34|1.35|1.36|1.37``, ``--feature-gates``, ``--runtime-config``: :mod:`sim.kubeapi.releases`).

pytest fixtures built on this live in ``tests/integration/kubeapi/conftest.py``.
"""

from sim.kubeapi.config import ServerConfig
from sim.kubeapi.hosting.in_process import KubeServer, ServerThread, serve
from sim.kubeapi.hosting.kubeconfig import write_kubeconfig
from sim.kubeapi.http.app import ApiServer
from sim.kubeapi.http.faults import Faults
from sim.kubeapi.machinery.errors import ApiError
from sim.kubeapi.storage.store import Store

__all__ = [
    "ApiError",
    "ApiServer",
    "Faults",
    "KubeServer",
    "ServerConfig",
    "ServerThread",
    "Store",
    "serve",
    "write_kubeconfig",
]
