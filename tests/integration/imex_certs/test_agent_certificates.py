"""The IMEX agent with the cdo signer, over the real API emulator with authentication and
deploy/'s RBAC and admission policies: the agent acts as its node-bound ServiceAccount token,
the signer as the domain controller's. The node's daemon starts only once its certificate is
issued, and each renewal is served by the same daemon after SIGUSR1 (checked over TLS)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest
from cryptography import x509

from services.domain_controller.imexsigner import ImexSigner
from shared import imexcert
from shared.crds.names import service_account_user
from shared.kube.client import KubeClient
from shared.kube.recorder import EventRecorder
from shared.kube.resources import CERTIFICATE_SIGNING_REQUESTS as CSRS
from shared.kube.resources import EVENTS, SECRETS
from shared.metrics import Metrics
from sim import identities
from sim.kubeapi import ServerConfig, serve
from tests.integration.imex.pki import Authority
from tests.integration.imex_agent.harness import (
    ImexCluster,
    SimNode,
    imex_cluster,
    install,
    random_topology,
)
from tests.support.wait import wait_for

NAMESPACE = identities.NAMESPACE
LIFETIME = dt.timedelta(seconds=36)
"""Issued certificates start a minute back (csrsigning.BACKDATE), so the agent renews this one
about four seconds after it is issued, and every four seconds after."""


@dataclass
class Setup:
    admin: KubeClient
    imex: ImexCluster
    node: SimNode
    agent_client: KubeClient
    ca: Authority
    probe: tuple[Path, Path]
    """A key and certificate from the IMEX CA, to ask the daemon for its certificate."""


@pytest.fixture
async def setup(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Setup]:
    config = ServerConfig(bookmark_interval_s=0.2, enforce_auth=True)
    admin_kubeconfig = tmp_path / "admin.kubeconfig"
    async with contextlib.AsyncExitStack() as stack:
        kube = await stack.enter_async_context(serve(config=config, kubeconfig=admin_kubeconfig))
        admin = await KubeClient.connect(kubeconfig=kube.kubeconfig)
        stack.push_async_callback(admin.close)
        await identities.install(admin, await identities.rendered_identities())
        await install(admin)
        imex = await stack.enter_async_context(
            imex_cluster(
                client=admin,
                bus_factory=_no_bus,
                topology=random_topology(racks=1, nodes=1),
                root_factory=lambda: tmp_path_factory.mktemp("n"),
                work=tmp_path,
            )
        )
        (node,) = imex.node_list()
        ca = Authority(tmp_path / "ca", "cdo-imex-ca")
        # As the imex-tls component sets the agent.
        node.imex_overrides = {
            "cert_signer": imexcert.SIGNER_NAME,
            "ca_file": str(ca.cert_path),
            "tls_target_override": imexcert.IMEX_NAME,
        }
        node.ctl_in_process = True
        await imex.register(node)
        node_ids = identities.NodeIdentities(
            admin, admin_kubeconfig=admin_kubeconfig, directory=tmp_path / "identities"
        )
        agent_client = await node_ids.client(identities.IMEX_AGENT_SA, node.name)
        stack.push_async_callback(agent_client.close)
        await stack.enter_async_context(_signer(admin, admin_kubeconfig, tmp_path))
        yield Setup(
            admin=admin,
            imex=imex,
            node=node,
            agent_client=agent_client,
            ca=ca,
            probe=ca.issue("127.0.0.1"),
        )


async def _no_bus(*_args: Any) -> None:
    raise AssertionError("these agents run without NATS")


@contextlib.asynccontextmanager
async def _signer(admin: KubeClient, admin_kubeconfig: Path, root: Path) -> AsyncIterator[None]:
    """The domain controller's signer, acting as the domain controller's ServiceAccount."""
    path = await identities.issue_kubeconfig(
        admin,
        admin_kubeconfig=admin_kubeconfig,
        account=identities.DOMAIN_CONTROLLER_SA,
        path=root / "identities" / "domain-controller.kubeconfig",
    )
    client = await KubeClient.connect(kubeconfig=path)
    metrics = Metrics()
    signer = ImexSigner(
        client,
        namespace=NAMESPACE,
        agent_user=service_account_user(NAMESPACE, identities.IMEX_AGENT_SA),
        lifetime=LIFETIME,
        recorder=EventRecorder(
            client, component="domain-controller", instance="t", metrics=metrics
        ),
        metrics=metrics,
        ca_retry_s=0.5,
    )
    task = asyncio.create_task(signer.run())
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.close()


async def install_ca(setup: Setup) -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": imexcert.CA_SECRET, "namespace": NAMESPACE},
        "type": "kubernetes.io/tls",
        "data": {
            "tls.crt": base64.b64encode(setup.ca.cert_path.read_bytes()).decode(),
            "tls.key": base64.b64encode(setup.ca.key_pem).decode(),
        },
    }
    await setup.admin.create(SECRETS, secret, namespace=NAMESPACE)


async def served_serial(setup: Setup) -> int | None:
    """The serial of the certificate the node's daemon presents to a peer now (None: it does
    not answer yet)."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=setup.ca.cert_path)
    key, cert = setup.probe
    context.load_cert_chain(cert, key)
    try:
        _reader, writer = await asyncio.wait_for(
            asyncio.open_connection(
                setup.node.address,
                setup.imex.peer_port,
                ssl=context,
                server_hostname=imexcert.IMEX_NAME,
            ),
            timeout=2.0,
        )
    except (OSError, ssl.SSLError, TimeoutError):
        return None
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    with contextlib.suppress(OSError, ssl.SSLError):
        await writer.wait_closed()
    return int(x509.load_der_x509_certificate(der).serial_number)


async def issued_serials(setup: Setup) -> set[int]:
    """The serials of the certificates the signer issued to this node's requests."""
    found = msgspec.json.decode(await setup.admin.list(CSRS))
    out: set[int] = set()
    for item in found["items"]:
        pem = (item.get("status") or {}).get("certificate")
        if pem and item["spec"]["username"].endswith(identities.IMEX_AGENT_SA):
            out.add(x509.load_pem_x509_certificate(base64.b64decode(pem)).serial_number)
    return out


def on_disk_serial(node: SimNode) -> Callable[[], int | None]:
    path = node.imex_dir / "tls" / "tls.crt"

    def read() -> int | None:
        if not path.exists():
            return None
        return int(x509.load_pem_x509_certificate(path.read_bytes()).serial_number)

    return read


async def test_the_daemon_starts_with_its_certificate_and_serves_each_renewal(
    setup: Setup,
) -> None:
    node = setup.node
    agent = await setup.imex.start(node, with_bus=False, client=setup.agent_client)

    # No IMEX CA yet: the signer approves the agent's request but cannot sign it.
    async def ca_missing() -> bool:
        events = msgspec.json.decode(await setup.admin.list(EVENTS, namespace="default"))
        return any(e["reason"] == "ImexCaMissing" for e in events["items"])

    await wait_for(ca_missing, what="the signer's ImexCaMissing Event")
    setup.imex.check_agents()
    assert node.started_pids == []
    assert not agent.controller.running
    assert on_disk_serial(node)() is None

    await install_ca(setup)
    await wait_for(lambda: agent.controller.running, what="the daemon, once the certificate is")
    pid = agent.controller.pid
    first = await wait_for(lambda: served_serial(setup), what="the daemon serving TLS")
    assert first in await issued_serials(setup)

    # The agent renews at two thirds of the lifetime; the same daemon reloads and serves it.
    async def renewed() -> int | None:
        serial = await served_serial(setup)
        return serial if serial is not None and serial != first else None

    second = await wait_for(renewed, what="the renewed certificate served")
    setup.imex.check_agents()
    assert second in await issued_serials(setup)
    assert node.started_pids == [pid]
    assert agent.controller.pid == pid
    assert agent.controller.reloads >= 1
    assert "SIGUSR1" in (node.imex_dir / "nvidia-imex.out").read_text()
