"""NATS with the auth callout, for a simulated system or a test: what the nats-auth-callout
component deploys, in one process.

    nats = CalloutNats(admin=kube_client, api_url=url, ca_pem=ca, store_dir=tmp / "nats")
    await nats.start()       # nats-server with the component's auth.conf + the authenticator
    await nats.set_up_jetstream()   # the stream and bucket, as the NATS bootstrap's identity
    path = await nats.token_file("cdo-health-monitor", node="n1", directory=tmp)
    NatsSettings(url=nats.url, token_file=str(path))     # what that node's monitor connects with
    await nats.stop()

Like the kubelet with projected tokens, it writes every token file again (a fresh token) after
``refresh_after_s`` (80% of the tokens' hour), so a client reconnecting when its user expires
finds a valid one.

The authenticator runs with an identity of its own (ServiceAccount ``cdo-nats-auth``, allowed to
create TokenReviews and nothing else), reviewing tokens through the API server like the
Deployment does; ``admin`` only makes that identity and requests tokens. Tokens for a node are
bound to its Node object (the simulated per-node services have no pods), which gives them the
node-name the permissions key on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import Any

import msgspec
import nats
import yaml
from nats.aio.client import Client

from services.nats_auth.callout import Authenticator, CalloutMetrics
from services.nats_auth.nkeyjwt import ACCOUNT, Signer
from services.nats_auth.permissions import Policy
from services.nats_auth.review import Reviewed, review
from shared.bus.jetstream import SetUp, set_up
from shared.bus.settings import NatsSettings
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.resources import Resource, core
from shared.metrics import Metrics
from sim.kubeapi.hosting.kubeconfig import kubeconfig
from sim.natsserver import NatsServer

log = logging.getLogger("cdo.sim.natsauth")

AUTH_CONF = (
    Path(__file__).resolve().parents[1]
    / "deploy"
    / "kustomize"
    / "components"
    / "nats-auth-callout"
    / "auth.conf"
)
"""The component's server configuration, used as it is (from a source checkout)."""

AUTHENTICATOR = "cdo-nats-auth"
NATS_BOOTSTRAP = "cdo-nats-bootstrap"
"""The one identity the policy lets create and update the stream and the bucket."""
CALLOUT_USER = "nats-auth"
AUDIENCE = "nats"
SERVICE_ACCOUNTS = core("serviceaccounts", "ServiceAccount")
CLUSTER_ROLES = Resource(
    group="rbac.authorization.k8s.io",
    version="v1",
    plural="clusterroles",
    kind="ClusterRole",
    namespaced=False,
)
CLUSTER_ROLE_BINDINGS = Resource(
    group="rbac.authorization.k8s.io",
    version="v1",
    plural="clusterrolebindings",
    kind="ClusterRoleBinding",
    namespaced=False,
)


class _TokenStatus(msgspec.Struct, frozen=True):
    token: str


class _TokenRequest(msgspec.Struct, frozen=True):
    status: _TokenStatus


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


async def _create(client: KubeClient, resource: Resource, body: dict[str, Any], **kw: str) -> None:
    try:
        await client.create(resource, body, **kw)
    except KubeApiError as exc:
        if not exc.already_exists:
            raise


class CalloutNats:
    """nats-server with the auth callout and the authenticator answering it."""

    def __init__(
        self,
        *,
        admin: KubeClient,
        api_url: str,
        ca_pem: bytes | None,
        store_dir: Path,
        namespace: str = "cdo-system",
        readers: tuple[str, ...] = (),
        password: str = "sim-nats-auth",
        workers: int = 8,
        token_seconds: int = 3600,
        refresh_after_s: float | None = None,
    ) -> None:
        self._admin = admin
        self._api_url = api_url
        self._ca_pem = ca_pem
        self._store_dir = store_dir
        self.namespace = namespace
        self._password = password
        self.signer = Signer.generate(ACCOUNT)
        self.metrics = Metrics()
        self.server = NatsServer(
            store_dir=store_dir,
            config=AUTH_CONF,
            environ={
                "NATS_AUTH_ISSUER": self.signer.public_key,
                "NATS_PASSWORD_NATS_AUTH": password,
            },
        )
        self._policy = Policy(namespace=namespace, readers=readers)
        self._workers = workers
        self._token_seconds = token_seconds
        self._refresh_after_s = (
            refresh_after_s if refresh_after_s is not None else 0.8 * token_seconds
        )
        self._files: dict[Path, tuple[str, str, str]] = {}
        self._refresher: asyncio.Task[None] | None = None
        self._kube: KubeClient | None = None
        self._connection: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._authenticator: Authenticator | None = None

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def authenticator(self) -> Authenticator:
        if self._authenticator is None:
            raise RuntimeError("not started")
        return self._authenticator

    @property
    def connection(self) -> Client:
        """The authenticator's own connection (the callout user's)."""
        if self._connection is None:
            raise RuntimeError("not started")
        return self._connection

    async def _identity(self) -> KubeClient:
        """The authenticator's API client, with its own ServiceAccount's token."""
        ns = self.namespace
        await _create(
            self._admin, SERVICE_ACCOUNTS, {"metadata": {"name": AUTHENTICATOR}}, namespace=ns
        )
        rule = {
            "apiGroups": ["authentication.k8s.io"],
            "resources": ["tokenreviews"],
            "verbs": ["create"],
        }
        await _create(
            self._admin, CLUSTER_ROLES, {"metadata": {"name": AUTHENTICATOR}, "rules": [rule]}
        )
        binding = {
            "metadata": {"name": AUTHENTICATOR},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": AUTHENTICATOR,
            },
            "subjects": [{"kind": "ServiceAccount", "name": AUTHENTICATOR, "namespace": ns}],
        }
        await _create(self._admin, CLUSTER_ROLE_BINDINGS, binding)
        token = await self.token(AUTHENTICATOR, audience="")
        config = kubeconfig(self._api_url, ca_pem=self._ca_pem)
        config["users"][0]["user"] = {"token": token}
        path = self._store_dir.parent / f"{AUTHENTICATOR}.kubeconfig"
        await asyncio.to_thread(_write, path, yaml.safe_dump(config))
        return await KubeClient.connect(kubeconfig=path)

    async def token(
        self,
        service_account: str,
        *,
        namespace: str = "",
        node: str = "",
        pod: str = "",
        audience: str = AUDIENCE,
        seconds: int = 3600,
    ) -> str:
        """A TokenRequest's token, bound to ``pod`` or else to the Node ``node`` if given;
        ``audience`` "" is the API server's own."""
        spec: dict[str, Any] = {"expirationSeconds": seconds}
        if audience:
            spec["audiences"] = [audience]
        if pod:
            spec["boundObjectRef"] = {"kind": "Pod", "apiVersion": "v1", "name": pod}
        elif node:
            spec["boundObjectRef"] = {"kind": "Node", "apiVersion": "v1", "name": node}
        raw = await self._admin.create(
            SERVICE_ACCOUNTS,
            {"spec": spec},
            namespace=namespace or self.namespace,
            name=service_account,
            subresource="token",
        )
        return msgspec.json.decode(raw, type=_TokenRequest).status.token

    async def token_file(
        self, service_account: str, *, directory: Path, namespace: str = "", node: str = ""
    ) -> Path:
        """A token for ``service_account`` (on ``node``) in a file, for CDO_NATS_TOKEN_FILE,
        written again with a fresh token every ``refresh_after_s``."""
        path = directory / f"{service_account}{'-' + node if node else ''}.token"
        self._files[path] = (service_account, namespace, node)
        await self._write_token(path)
        return path

    async def _write_token(self, path: Path) -> None:
        service_account, namespace, node = self._files[path]
        token = await self.token(
            service_account, namespace=namespace, node=node, seconds=self._token_seconds
        )
        await asyncio.to_thread(_write, path, token)

    async def _refresh(self) -> None:
        while True:
            await asyncio.sleep(self._refresh_after_s)
            for path in list(self._files):
                try:
                    await self._write_token(path)
                except KubeApiError as exc:
                    # The old token stays until the next round; its client reconnects later.
                    log.warning(
                        "token file not refreshed", extra={"path": str(path), "error": str(exc)}
                    )

    async def start(self) -> None:
        self._kube = await self._identity()
        await asyncio.to_thread(self.server.start)
        self._connection = await nats.connect(
            self.server.url, user=CALLOUT_USER, password=self._password, max_reconnect_attempts=-1
        )
        kube = self._kube

        async def reviewer(token: str) -> Reviewed:
            return await review(kube, token, audience=AUDIENCE)

        authenticator = self._authenticator = Authenticator(
            connection=self._connection,
            reviewer=reviewer,
            signer=self.signer,
            policy=self._policy,
            account="CDO",
            metrics=CalloutMetrics(self.metrics.registry),
            workers=self._workers,
        )
        await self._connection.subscribe(authenticator.subject, cb=authenticator.receive)
        await self._connection.flush()
        self._task = asyncio.create_task(authenticator.run(), name="nats-authenticator")
        self._refresher = asyncio.create_task(self._refresh(), name="nats-token-refresh")

    async def set_up_jetstream(self, settings: NatsSettings | None = None) -> SetUp:
        """The stream and the bucket, made as the NATS bootstrap makes them: connected with a
        token of its ServiceAccount (made here if missing), so through the policy."""
        await _create(
            self._admin,
            SERVICE_ACCOUNTS,
            {"metadata": {"name": NATS_BOOTSTRAP}},
            namespace=self.namespace,
        )
        token = await self.token(NATS_BOOTSTRAP, seconds=600)
        client = await nats.connect(self.url, token=token, max_reconnect_attempts=1)
        try:
            return await set_up(client.jetstream(timeout=5), settings or NatsSettings(url=self.url))
        finally:
            await client.close()

    def count(self, result: str) -> float:
        """``cdo_nats_auth_requests_total`` of ``result``."""
        labels = {"result": result}
        value = self.metrics.registry.get_sample_value("cdo_nats_auth_requests_total", labels)
        return value or 0.0

    async def stop(self) -> None:
        for task in (self._refresher, self._task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self._connection is not None:
            await self._connection.close()
        if self._kube is not None:
            await self._kube.close()
        await asyncio.to_thread(self.server.stop)
