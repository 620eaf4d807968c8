"""A real nats-server with the auth callout, the authenticator, and the API emulator that
issues and reviews the ServiceAccount tokens, over real HTTP with authentication enforced.

- ``cluster``: the emulator with cdo's namespace, two Nodes (one name with dots), the
  services' ServiceAccounts, a reader ServiceAccount in another namespace and the
  authenticator's own ServiceAccount, allowed only to create TokenReviews;
- ``callout``: nats-server running the nats-auth-callout component's auth.conf, and the
  authenticator answering its requests with its own identity's API client;
- ``Cluster.token``: a TokenRequest for the ``nats`` audience, bound to a pod on a node.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
import pytest
import yaml
from nats.aio.client import Client

from services.nats_auth.callout import Authenticator, CalloutMetrics
from services.nats_auth.nkeyjwt import ACCOUNT, Signer
from services.nats_auth.permissions import Policy
from services.nats_auth.review import Reviewed, review
from shared.kube.client import KubeClient
from shared.metrics import Metrics
from sim.kubeapi import KubeServer, ServerConfig, serve
from sim.kubeapi.hosting.kubeconfig import kubeconfig
from sim.natsserver import NatsServer
from tests.integration.kubeapi.auth_helpers import admin, grant, ok, sa_subject, service_account
from tests.integration.kubeapi.conftest import Http

ROOT = Path(__file__).resolve().parents[3]
AUTH_CONF = ROOT / "deploy" / "kustomize" / "components" / "nats-auth-callout" / "auth.conf"
NAMESPACE = "cdo-system"
READERS_NAMESPACE = "schedulers"
NODE_A = "node-a"
NODE_B = "gb200-r1-n02.example"
SERVICES = ("cdo-imex-agent", "cdo-health-monitor", "cdo-domain-controller", "cdo-clique-allocator")
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


@dataclass
class Callout:
    server: NatsServer
    authenticator: Authenticator
    metrics: Metrics
    connection: Client

    def count(self, result: str) -> float:
        value = self.metrics.registry.get_sample_value(
            "cdo_nats_auth_requests_total", {"result": result}
        )
        return value or 0.0


async def authenticator_client(cluster: Cluster, directory: Path) -> KubeClient:
    """An API client with the authenticator's own ServiceAccount token."""
    token = await cluster.token(
        AUTHENTICATOR, audience="https://kubernetes.default.svc.cluster.local"
    )
    config = kubeconfig(cluster.kube.url, ca_pem=cluster.kube.ca_pem)
    config["users"][0]["user"] = {"token": token}
    path = directory / "nats-auth.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return await KubeClient.connect(kubeconfig=path)


@pytest.fixture
async def callout(cluster: Cluster, tmp_path: Path) -> AsyncIterator[Callout]:
    signer = Signer.generate(ACCOUNT)
    server = NatsServer(
        store_dir=tmp_path / "nats",
        config=AUTH_CONF,
        environ={
            "NATS_AUTH_ISSUER": signer.public_key,
            "NATS_PASSWORD_NATS_AUTH": CALLOUT_PASSWORD,
        },
    )
    server.start()
    kube = await authenticator_client(cluster, tmp_path)
    connection = await nats.connect(
        server.url, user="nats-auth", password=CALLOUT_PASSWORD, max_reconnect_attempts=1
    )
    metrics = Metrics()

    async def reviewer(token: str) -> Reviewed:
        return await review(kube, token, audience="nats")

    authenticator = Authenticator(
        connection=connection,
        reviewer=reviewer,
        signer=signer,
        policy=Policy(namespace=NAMESPACE, readers=(f"{READERS_NAMESPACE}/dashboard",)),
        account="CDO",
        metrics=CalloutMetrics(metrics.registry),
        workers=4,
    )
    await connection.subscribe(authenticator.subject, cb=authenticator.receive)
    await connection.flush()
    task = asyncio.create_task(authenticator.run())
    try:
        yield Callout(
            server=server, authenticator=authenticator, metrics=metrics, connection=connection
        )
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await connection.close()
        await kube.close()
        server.stop()
