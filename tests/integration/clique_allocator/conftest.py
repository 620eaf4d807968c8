"""A clique allocator as a real subprocess against the emulator and a real nats-server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from shared.crds import install_crds
from shared.kube.client import KubeClient
from sim.kubeapi import KubeServer
from sim.natsserver import free_port
from tests.support.processes import ProgramProcess

from .harness import Allocator, Api, Tls

LEASE_DURATION_S = 2.0
FAST_SETTINGS = {
    "CDO_CLIQUE_ALLOCATOR_LEASE_NAMESPACE": "default",
    "CDO_CLIQUE_ALLOCATOR_LEADER_ELECTION_LEASE_DURATION_S": str(LEASE_DURATION_S),
    "CDO_CLIQUE_ALLOCATOR_LEADER_ELECTION_RENEW_DEADLINE_S": "1.5",
    "CDO_CLIQUE_ALLOCATOR_LEADER_ELECTION_RETRY_PERIOD_S": "0.2",
    "CDO_CLIQUE_ALLOCATOR_INFORMER_BACKOFF_INITIAL_S": "0.05",
    "CDO_CLIQUE_ALLOCATOR_INFORMER_BACKOFF_MAX_S": "0.5",
    "CDO_CLIQUE_ALLOCATOR_RETRIES_BACKOFF_MAX_S": "0.5",
    "CDO_CLIQUE_ALLOCATOR_CAPACITY_INTERVAL_S": "0.05",
    "CDO_CLIQUE_ALLOCATOR_WEBHOOK_HOST": "127.0.0.1",
    "CDO_SHUTDOWN_STEP_TIMEOUT_S": "3",
}

AllocatorFactory = Callable[..., Allocator]


@pytest.fixture
async def crds(kube_client: KubeClient) -> None:
    await install_crds(kube_client)


@pytest.fixture
def api(kube_client: KubeClient, crds: None) -> Api:
    return Api(kube_client)


@pytest.fixture
def tls(tmp_path: Path) -> Tls:
    return Tls(tmp_path / "webhook-tls")


@pytest.fixture
async def start_allocator(
    emulator: KubeServer, service_env: dict[str, str], tmp_path: Path, tls: Tls
) -> AsyncIterator[AllocatorFactory]:
    """Start allocator processes; every one is stopped at the end."""
    started: list[Allocator] = []

    def start(instance: str = "ca-0", *, webhook_port: int = 0, **extra: str) -> Allocator:
        port = int(service_env["CDO_HTTP_PORT"]) if not started else free_port()
        env = {
            **service_env,
            **FAST_SETTINGS,
            "CDO_HTTP_PORT": str(port),
            "CDO_INSTANCE": instance,
            "CDO_CLIQUE_ALLOCATOR_KUBECONFIG": str(emulator.kubeconfig),
            "CDO_CLIQUE_ALLOCATOR_WEBHOOK_PORT": str(webhook_port),
            "CDO_CLIQUE_ALLOCATOR_WEBHOOK_CERT_FILE": str(tls.cert_file),
            "CDO_CLIQUE_ALLOCATOR_WEBHOOK_KEY_FILE": str(tls.key_file),
            **extra,
        }
        process = ProgramProcess(
            "services.clique_allocator",
            env=env,
            workdir=tmp_path,
            name=f"{instance}-{len(started)}",
        ).start()
        allocator = Allocator(process, port=port)
        started.append(allocator)
        return allocator

    yield start
    await asyncio.gather(*(asyncio.to_thread(a.stop) for a in started))


@pytest.fixture
async def allocator(start_allocator: AllocatorFactory, api: Api, tls: Tls) -> Allocator:
    """One running, ready allocator, its webhook registered with the API server."""
    running = start_allocator()
    await running.wait_ready()
    await api.register_webhook(tls, running.webhook_port)
    return running
