"""Per-node IMEX certificates over the real API emulator (HTTP, authentication and RBAC on):
each node's agent gets a certificate for its own node from the cdo.dev/imex signer, never one
naming another node, and a revoked node gets none; the signer needs its signer permissions."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from services.domain_controller.imexsigner import ImexSigner
from services.imex_agent.nodecert import NodeCertificates, build_request
from shared import imexcert
from shared.crds.names import service_account_user
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.keys import ObjectKey
from shared.kube.recorder import EventRecorder
from shared.kube.resources import CERTIFICATE_SIGNING_REQUESTS as CSRS
from shared.metrics import Metrics
from sim.identities import kubeconfig_for
from sim.kubeapi import KubeServer, ServerConfig, serve
from tests.integration.imex.pki import Authority
from tests.integration.kubeapi.auth_helpers import (
    admin,
    grant,
    ok,
    pod,
    sa_subject,
    service_account,
    token,
)
from tests.integration.kubeapi.conftest import Http
from tests.support.wait import wait_for

NAMESPACE = "cdo-system"
AGENT = "cdo-imex-agent"
CONTROLLER = "cdo-domain-controller"
CSR_PATH = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
AGENT_RULES = [
    {
        "apiGroups": ["certificates.k8s.io"],
        "resources": ["certificatesigningrequests"],
        "verbs": ["create", "get"],
    }
]
SIGNER_RULES = [
    {
        "apiGroups": ["certificates.k8s.io"],
        "resources": ["certificatesigningrequests"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["certificates.k8s.io"],
        "resources": ["certificatesigningrequests/approval", "certificatesigningrequests/status"],
        "verbs": ["update"],
    },
    {
        "apiGroups": ["certificates.k8s.io"],
        "resources": ["signers"],
        "resourceNames": [imexcert.SIGNER_NAME],
        "verbs": ["approve", "sign"],
    },
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
]
SIGNER_SECRETS = [
    {
        "apiGroups": [""],
        "resources": ["secrets"],
        "resourceNames": [imexcert.CA_SECRET],
        "verbs": ["get"],
    },
    {
        "apiGroups": [""],
        "resources": ["configmaps"],
        "resourceNames": [imexcert.REVOCATIONS_CONFIGMAP],
        "verbs": ["get"],
    },
]


@dataclass
class Cluster:
    kube: KubeServer
    http: Http
    root: Path
    ca: Authority

    async def client_for(self, account: str, *, node: str = "") -> KubeClient:
        """A client with ``account``'s token, bound to a pod on ``node`` when given."""
        spec: dict[str, Any] = {}
        if node:
            created = await pod(
                self.http, f"{account}-{node}", sa=account, node=node, namespace=NAMESPACE
            )
            spec = {
                "boundObjectRef": {
                    "kind": "Pod",
                    "apiVersion": "v1",
                    "name": created["metadata"]["name"],
                    "uid": created["metadata"]["uid"],
                }
            }
        jwt = await token(self.http, account, namespace=NAMESPACE, spec=spec)
        admin_config = yaml.safe_load((self.root / "admin.kubeconfig").read_text())
        path = self.root / f"{account}-{node or 'unbound'}.kubeconfig"
        path.write_text(yaml.safe_dump(kubeconfig_for(admin_config, user=account, token=jwt)))
        return await KubeClient.connect(kubeconfig=path)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    config = ServerConfig(bookmark_interval_s=0.2, enforce_auth=True)
    async with (
        serve(config=config, kubeconfig=tmp_path / "admin.kubeconfig") as kube,
        admin(kube) as http,
    ):
        await ok(http, "POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        for sa in (AGENT, CONTROLLER):
            await service_account(http, sa, NAMESPACE)
        for node in ("node-a", "node-b"):
            await ok(http, "POST", "/api/v1/nodes", {"metadata": {"name": node}})
        await grant(http, "agent-csrs", AGENT_RULES, sa_subject(AGENT, NAMESPACE), namespace=None)
        await grant(http, "signer", SIGNER_RULES, sa_subject(CONTROLLER, NAMESPACE), namespace=None)
        await grant(
            http,
            "signer-ca",
            SIGNER_SECRETS,
            sa_subject(CONTROLLER, NAMESPACE),
            namespace=NAMESPACE,
        )
        yield Cluster(kube=kube, http=http, root=tmp_path, ca=Authority(tmp_path / "ca", "imex"))


async def install_ca(cluster: Cluster) -> None:
    secret = {
        "metadata": {"name": imexcert.CA_SECRET},
        "type": "kubernetes.io/tls",
        "data": {
            "tls.crt": base64.b64encode(cluster.ca.cert_path.read_bytes()).decode(),
            "tls.key": base64.b64encode(cluster.ca.key_pem).decode(),
        },
    }
    await ok(cluster.http, "POST", f"/api/v1/namespaces/{NAMESPACE}/secrets", secret)


@pytest.fixture
async def signer(cluster: Cluster) -> AsyncIterator[ImexSigner]:
    client = await cluster.client_for(CONTROLLER)
    metrics = Metrics()
    signer = ImexSigner(
        client,
        namespace=NAMESPACE,
        agent_user=service_account_user(NAMESPACE, AGENT),
        lifetime=dt.timedelta(hours=1),
        recorder=EventRecorder(
            client, component="domain-controller", instance="test", metrics=metrics
        ),
        metrics=metrics,
    )
    task = asyncio.create_task(signer.run())
    try:
        yield signer
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.close()


async def csr(cluster: Cluster, name: str) -> dict[str, Any]:
    found: dict[str, Any] = await ok(cluster.http, "GET", f"{CSR_PATH}/{name}")
    return found


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond.get("type") == kind:
            return dict(cond)
    return None


async def test_each_node_gets_its_own_certificate_and_never_another_nodes(
    cluster: Cluster, signer: ImexSigner
) -> None:
    await install_ca(cluster)
    client = await cluster.client_for(AGENT, node="node-a")
    renewed: list[bool] = []
    certificates = NodeCertificates(
        client,
        node="node-a",
        directory=cluster.root / "node-a-tls",
        signer=imexcert.SIGNER_NAME,
        on_renewed=lambda: renewed.append(True),
    )
    task = asyncio.create_task(certificates.run())
    try:
        await wait_for(certificates.ready, what="node-a's certificate")
        cert = x509.load_pem_x509_certificate(certificates.cert_file.read_bytes())
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert sorted(names.get_values_for_type(x509.DNSName)) == ["cdo-imex", "node-a"]
        assert cert.issuer.rfc4514_string() == "CN=imex"
        assert renewed == [True]
        assert certificates.key_file.stat().st_mode & 0o077 == 0

        # The same agent identity asking for node-b's certificate is denied, with the reason.
        forged = build_request("node-b", ec.generate_private_key(ec.SECP256R1()))
        body = {
            "metadata": {"name": "forged"},
            "spec": {
                "request": base64.b64encode(forged).decode(),
                "signerName": imexcert.SIGNER_NAME,
                "usages": list(imexcert.USAGES),
                # Ignored: the API server sets who asked from the token.
                "username": "system:node:node-b",
            },
        }
        await client.create(CSRS, body)

        async def denied() -> dict[str, Any] | None:
            return condition(await csr(cluster, "forged"), "Denied")

        verdict = await wait_for(denied, what="the forged request's denial")
        assert verdict["reason"] == "SubjectMismatch"
        assert "node-a" in verdict["message"]
        stored = await csr(cluster, "forged")
        assert stored["spec"]["username"] == service_account_user(NAMESPACE, AGENT)
        assert "certificate" not in stored.get("status", {})
        events = await ok(cluster.http, "GET", "/api/v1/namespaces/default/events")
        assert any(e["reason"] == "SubjectMismatch" for e in events["items"])
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.close()


async def test_a_revoked_node_is_refused_and_a_missing_ca_is_named(
    cluster: Cluster, signer: ImexSigner
) -> None:
    revoked = {
        "metadata": {"name": imexcert.REVOCATIONS_CONFIGMAP},
        "data": {"node-b": "disk stolen"},
    }
    await ok(cluster.http, "POST", f"/api/v1/namespaces/{NAMESPACE}/configmaps", revoked)
    clients = [await cluster.client_for(AGENT, node=node) for node in ("node-a", "node-b")]
    try:
        for client, node in zip(clients, ("node-a", "node-b"), strict=True):
            key = ec.generate_private_key(ec.SECP256R1())
            body = {
                "metadata": {"name": f"req-{node}"},
                "spec": {
                    "request": base64.b64encode(build_request(node, key)).decode(),
                    "signerName": imexcert.SIGNER_NAME,
                    "usages": list(imexcert.USAGES),
                },
            }
            await client.create(CSRS, body)

        async def decided() -> tuple[dict[str, Any], dict[str, Any]] | None:
            a, b = await csr(cluster, "req-node-a"), await csr(cluster, "req-node-b")
            a_ok, b_no = condition(a, "Approved"), condition(b, "Denied")
            return (a_ok, b_no) if a_ok and b_no else None

        _, refusal = await wait_for(decided, what="both verdicts")
        assert refusal["reason"] == "NodeRevoked"
        assert "disk stolen" in refusal["message"]

        # Approved, but no CA yet: the request waits, and an Event names what to create.
        async def ca_missing() -> bool:
            events = await ok(cluster.http, "GET", "/api/v1/namespaces/default/events")
            return any(
                e["reason"] == "ImexCaMissing" and imexcert.CA_SECRET in e["message"]
                for e in events["items"]
            )

        await wait_for(ca_missing, what="the missing CA's Event")
        assert "certificate" not in (await csr(cluster, "req-node-a")).get("status", {})
        await install_ca(cluster)
        signer.queue.add(ObjectKey(name="req-node-a"))

        async def issued() -> bool:
            return bool((await csr(cluster, "req-node-a")).get("status", {}).get("certificate"))

        await wait_for(issued, what="node-a's certificate once the CA exists")
    finally:
        for client in clients:
            await client.close()


async def test_only_a_signers_approver_may_approve(cluster: Cluster) -> None:
    approval = [
        {
            "apiGroups": ["certificates.k8s.io"],
            "resources": ["certificatesigningrequests/approval"],
            "verbs": ["update"],
        }
    ]
    await grant(
        cluster.http, "agent-approval", approval, sa_subject(AGENT, NAMESPACE), namespace=None
    )
    client = await cluster.client_for(AGENT, node="node-a")
    try:
        key = ec.generate_private_key(ec.SECP256R1())
        body = {
            "metadata": {"name": "self-approved"},
            "spec": {
                "request": base64.b64encode(build_request("node-a", key)).decode(),
                "signerName": imexcert.SIGNER_NAME,
                "usages": list(imexcert.USAGES),
            },
        }
        created = await client.create(CSRS, body)
        obj = json.loads(created)
        obj["status"] = {"conditions": [{"type": "Approved", "status": "True", "reason": "Me"}]}
        with pytest.raises(KubeApiError) as refused:
            await client.replace(CSRS, "self-approved", obj, subresource="approval")
        assert refused.value.code == 403
        assert (
            f'user not permitted to approve requests with signerName "{imexcert.SIGNER_NAME}"'
            in str(refused.value)
        )
        assert condition(await csr(cluster, "self-approved"), "Approved") is None
    finally:
        await client.close()
