"""A real nats-server with the auth callout, the authenticator, and the API emulator that
issues and reviews the ServiceAccount tokens, over real HTTP with authentication enforced.

- ``cluster``: the emulator with cdo's namespace, two Nodes (one name with dots), the
  services' ServiceAccounts, a reader ServiceAccount in another namespace and the
  authenticator's own ServiceAccount, allowed only to create TokenReviews;
- ``callout``: nats-server running the nats-auth-callout component's auth.conf, and the
  authenticator answering its requests with its own identity's API client (sim/natsauth.py);
  the stream and the bucket made by the NATS bootstrap's identity, through the policy;
- ``Cluster.token``: a TokenRequest for the ``nats`` audience, bound to a pod on a node.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from shared.kube.client import KubeClient
from sim.kubeapi import KubeServer, ServerConfig, serve
from sim.natsauth import CalloutNats
from tests.integration.kubeapi.auth_helpers import admin, grant, ok, sa_subject, service_account
from tests.integration.kubeapi.conftest import Http

NAMESPACE = "cdo-system"
READERS_NAMESPACE = "schedulers"
NODE_A = "node-a"
NODE_B = "gb200-r1-n02.example"
SERVICES = (
    "cdo-imex-agent",
    "cdo-health-monitor",
    "cdo-domain-controller",
    "cdo-clique-allocator",
    "cdo-nats-bootstrap",
)
AUTHENTICATOR = "cdo-nats-auth"
CALLOUT_PASSWORD = "callout-password"


@dataclass
class Cluster:
    kube: KubeServer
    http: Http
    pods: set[str] = field(default_factory=set)

    async def pod(self, sa: str, node: str, *, namespace: str = NAMESPACE) -> str:
        name = f"{sa}-{node.replace('.', '-')}"
        if name not in self.pods:
            body = {
                "metadata": {"name": name},
                "spec": {
                    "serviceAccountName": sa,
                    "nodeName": node,
                    "containers": [{"name": "c", "image": "x"}],
                },
            }
            await ok(self.http, "POST", f"/api/v1/namespaces/{namespace}/pods", body)
            self.pods.add(name)
        return name

    async def token(
        self,
        sa: str,
        *,
        node: str = "",
        namespace: str = NAMESPACE,
        audience: str = "nats",
        seconds: int = 3600,
    ) -> str:
        """A token of ``sa`` for ``audience``; with ``node``, bound to a pod on that node."""
        spec: dict[str, Any] = {"audiences": [audience], "expirationSeconds": seconds}
        if node:
            pod = await self.pod(sa, node, namespace=namespace)
            spec["boundObjectRef"] = {"kind": "Pod", "apiVersion": "v1", "name": pod}
        path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{sa}/token"
        out = await ok(self.http, "POST", path, {"spec": spec})
        value: str = out["status"]["token"]
        return value

    def move_clock(self, seconds: float) -> None:
        """Move the API server's clock (what it checks token expiry against)."""
        tokens = self.kube.api.access.tokens
        real = tokens.clock
        tokens.clock = lambda: real() + seconds


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    config = ServerConfig(bookmark_interval_s=0.2, enforce_auth=True)
    async with (
        serve(config=config, kubeconfig=tmp_path / "admin.kubeconfig") as kube,
        admin(kube) as http,
    ):
        for namespace in (NAMESPACE, READERS_NAMESPACE):
            await ok(http, "POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
        for node in (NODE_A, NODE_B):
            await ok(http, "POST", "/api/v1/nodes", {"metadata": {"name": node}})
        for sa in (*SERVICES, AUTHENTICATOR):
            await service_account(http, sa, NAMESPACE)
        await service_account(http, "dashboard", READERS_NAMESPACE)
        await service_account(http, "intruder", READERS_NAMESPACE)
        await grant(
            http,
            AUTHENTICATOR,
            [
                {
                    "apiGroups": ["authentication.k8s.io"],
                    "resources": ["tokenreviews"],
                    "verbs": ["create"],
                }
            ],
            sa_subject(AUTHENTICATOR, NAMESPACE),
            namespace=None,
        )
        yield Cluster(kube=kube, http=http)


@pytest.fixture
def readers() -> tuple[str, ...]:
    """The authenticator's readers (CDO_NATS_AUTH_READERS); override in a module."""
    return (f"{READERS_NAMESPACE}/dashboard",)


@pytest.fixture
async def callout(
    cluster: Cluster, tmp_path: Path, readers: tuple[str, ...]
) -> AsyncIterator[CalloutNats]:
    admin_client = await KubeClient.connect(kubeconfig=cluster.kube.kubeconfig)
    nats = CalloutNats(
        admin=admin_client,
        api_url=cluster.kube.url,
        ca_pem=cluster.kube.ca_pem,
        store_dir=tmp_path / "nats",
        namespace=NAMESPACE,
        readers=readers,
        workers=4,
    )
    try:
        await nats.start()
        await nats.set_up_jetstream()
        yield nats
    finally:
        await nats.stop()
        await admin_client.close()
