"""/metrics behind TokenReview and SubjectAccessReview, against the API emulator over HTTPS with
authentication and RBAC enforced: the probe server of a service whose own identity may only
create the two reviews, and scrapers with and without ``cdo-metrics-reader``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
import yaml

from shared.kube.client import KubeClient
from shared.metrics import Metrics
from shared.runtime.http import ProbeServer
from shared.runtime.metricsaccess import MetricsAccess
from shared.runtime.probes import Readiness
from sim.identities import kubeconfig_for
from sim.kubeapi import ServerConfig, serve
from tests.integration.kubeapi.auth_helpers import admin, grant, ok, sa_subject, service_account
from tests.integration.kubeapi.conftest import Http

NAMESPACE = "cdo-system"
SERVICE = "cdo-domain-controller"
METRICS_READER = [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
REVIEWER = [
    {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
    {
        "apiGroups": ["authorization.k8s.io"],
        "resources": ["subjectaccessreviews"],
        "verbs": ["create"],
    },
]


@dataclass
class Scrape:
    http: Http
    access: MetricsAccess
    port: int
    metrics: Metrics
    service_kubeconfig: Path

    async def token(self, sa: str) -> str:
        path = f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{sa}/token"
        out = await ok(self.http, "POST", path, {"spec": {}})
        value: str = out["status"]["token"]
        return value

    async def get(self, authorization: str | None = None) -> tuple[int, str, str]:
        """(status, body, WWW-Authenticate) of GET /metrics with that Authorization header."""
        headers = {"Authorization": authorization} if authorization is not None else {}
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{self.port}/metrics", headers=headers) as response,
        ):
            body = await response.text()
            return response.status, body, response.headers.get("WWW-Authenticate", "")

    def refused(self, reason: str) -> float:
        value = self.metrics.registry.get_sample_value(
            "cdo_metrics_access_refused_total", {"reason": reason}
        )
        return value or 0.0


@pytest.fixture
async def scrape(tmp_path: Path) -> AsyncIterator[Scrape]:
    """The probe server of a service that has no API client yet (``access.use`` gives it)."""
    config = ServerConfig(bookmark_interval_s=0.2, enforce_auth=True)
    async with (
        serve(config=config, kubeconfig=tmp_path / "admin.kubeconfig") as kube,
        admin(kube) as http,
    ):
        await ok(http, "POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        for sa in (SERVICE, "prometheus", "intruder"):
            await service_account(http, sa, NAMESPACE)
        await grant(
            http, "cdo-metrics-auth", REVIEWER, sa_subject(SERVICE, NAMESPACE), namespace=None
        )
        await grant(
            http,
            "cdo-metrics-reader",
            METRICS_READER,
            sa_subject("prometheus", NAMESPACE),
            namespace=None,
        )
        metrics = Metrics()
        access = MetricsAccess(required=True, registry=metrics.registry)
        server = ProbeServer(
            readiness=Readiness(), metrics=metrics, host="127.0.0.1", port=0, access=access
        )
        await server.start()
        assert server.bound_port is not None
        scrape = Scrape(
            http=http,
            access=access,
            port=server.bound_port,
            metrics=metrics,
            service_kubeconfig=tmp_path / "service.kubeconfig",
        )
        own = kubeconfig_for(
            yaml.safe_load((tmp_path / "admin.kubeconfig").read_text()),
            user=SERVICE,
            token=await scrape.token(SERVICE),
        )
        scrape.service_kubeconfig.write_text(yaml.safe_dump(own))
        try:
            yield scrape
        finally:
            await server.stop()


@pytest.fixture
async def serving(scrape: Scrape) -> AsyncIterator[Scrape]:
    """The same, once the service has its API client (its own identity)."""
    client = await KubeClient.connect(kubeconfig=scrape.service_kubeconfig)
    scrape.access.use(client)
    try:
        yield scrape
    finally:
        await client.close()


async def test_an_authorised_scraper_reads_the_metrics(serving: Scrape) -> None:
    token = await serving.token("prometheus")
    for _ in range(2):  # the second from the kept decision
        status, body, _ = await serving.get(f"Bearer {token}")
        assert status == 200
        assert "# HELP cdo_bus_messages_published_total" in body
    assert serving.refused("forbidden") == serving.refused("unauthenticated") == 0


async def test_a_scraper_without_the_role_is_forbidden_and_counted(serving: Scrape) -> None:
    token = await serving.token("intruder")
    status, body, _ = await serving.get(f"Bearer {token}")
    assert status == 403
    assert body.startswith(
        f'forbidden: user "system:serviceaccount:{NAMESPACE}:intruder" cannot get path "/metrics"'
    )
    assert "ClusterRole cdo-metrics-reader" in body
    assert "cdo_" not in body
    await serving.get(f"Bearer {token}")
    assert serving.refused("forbidden") == 2


@pytest.mark.parametrize(
    "authorization",
    [None, "Basic dXNlcjpwdw==", "Bearer ", "Bearer not-a-token"],
    ids=["none", "basic", "empty", "garbage"],
)
async def test_no_token_or_a_bad_one_is_unauthorised(
    serving: Scrape, authorization: str | None
) -> None:
    status, body, challenge = await serving.get(authorization)
    assert status == 401
    assert body.startswith("unauthorized: ")
    assert challenge.startswith("Bearer")
    assert serving.refused("unauthenticated") == 1


async def test_before_the_service_has_an_api_client_nothing_is_served(scrape: Scrape) -> None:
    """Fail closed: not open while it cannot review."""
    status, body, _ = await scrape.get(f"Bearer {await scrape.token('prometheus')}")
    assert status == 503
    assert body.startswith("metrics access is not ready")
    assert scrape.refused("unavailable") == 1


async def test_open_when_authorisation_is_off() -> None:
    metrics = Metrics()
    server = ProbeServer(
        readiness=Readiness(),
        metrics=metrics,
        host="127.0.0.1",
        port=0,
        access=MetricsAccess(required=False, registry=metrics.registry),
    )
    await server.start()
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{server.bound_port}/metrics") as response,
        ):
            assert response.status == 200
    finally:
        await server.stop()
