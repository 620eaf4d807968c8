"""Fixtures every test directory may use: a real nats-server, bus clients, subprocess helpers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider

from shared.bus import EventBus, NatsSettings
from shared.kube.client import KubeClient
from shared.metrics import Metrics
from sim.kubeapi import KubeServer, ServerConfig, serve
from sim.natsserver import NatsServer, free_port


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    """A real nats-server with JetStream on a free port, its store under tmp_path, and the
    stream and bucket the NATS bootstrap makes at install."""
    server = NatsServer(store_dir=tmp_path / "nats")
    server.start()
    server.set_up_jetstream()
    try:
        yield server
    finally:
        server.stop()


BusFactory = Callable[..., Awaitable[EventBus]]


@pytest.fixture
async def bus_factory(nats_server: NatsServer) -> AsyncIterator[BusFactory]:
    """Connected EventBus instances (each with its own Metrics); all closed at the end."""
    made: list[EventBus] = []

    async def make(
        service: str = "test",
        *,
        settings: NatsSettings | None = None,
        metrics: Metrics | None = None,
    ) -> EventBus:
        bus = EventBus(
            settings or NatsSettings(url=nats_server.url, reconnect_wait_s=0.1),
            service=service,
            instance=f"i{len(made)}",
            metrics=metrics or Metrics(),
            tracer=TracerProvider().get_tracer("test"),
        )
        await bus.connect()
        await bus.ensure_jetstream()
        made.append(bus)
        return bus

    yield make
    for bus in made:
        await bus.stop_intake()
        await bus.close()


@pytest.fixture
def service_env(nats_server: NatsServer) -> dict[str, str]:
    """Environment for a cdo service subprocess talking to the test's nats-server."""
    return {
        "CDO_NATS_URL": nats_server.url,
        "CDO_NATS_RECONNECT_WAIT_S": "0.2",
        "CDO_HTTP_HOST": "127.0.0.1",
        "CDO_HTTP_PORT": str(free_port()),
        "CDO_LOG_LEVEL": "info",
    }


@pytest.fixture
def emulator_config() -> ServerConfig:
    """Settings of the ``emulator`` fixture; override in a module to change them."""
    return ServerConfig(bookmark_interval_s=0.5)


@pytest.fixture
async def emulator(emulator_config: ServerConfig, tmp_path: Path) -> AsyncIterator[KubeServer]:
    """The Kubernetes API emulator over real HTTP on a free port, with a kubeconfig for it."""
    async with serve(config=emulator_config, kubeconfig=tmp_path / "kubeconfig") as server:
        yield server


@pytest.fixture
async def kube_client(emulator: KubeServer) -> AsyncIterator[KubeClient]:
    """cdo's Kubernetes client, configured from the emulator's kubeconfig like a service is."""
    client = await KubeClient.connect(kubeconfig=emulator.kubeconfig)
    yield client
    await client.close()
