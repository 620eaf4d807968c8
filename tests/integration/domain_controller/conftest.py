"""A domain controller as a real subprocess against the emulator and a real nats-server."""

from __future__ import annotations

import asyncio
import re
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from shared.crds import install_crds
from shared.events import DomainMembershipChanged
from shared.kube.client import KubeClient
from sim.kubeapi import KubeServer
from sim.natsserver import free_port
from tests.conftest import BusFactory
from tests.support.conversion import conversion_webhook
from tests.support.processes import ProgramProcess
from tests.support.wait import wait_for

from .cluster import Cluster, MembershipLog

# Short lease timings keep fail-over tests fast; the Lease stores whole seconds.
LEASE_DURATION_S = 2.0
FAST_SETTINGS = {
    "CDO_DOMAIN_CONTROLLER_LEASE_NAMESPACE": "default",
    "CDO_DOMAIN_CONTROLLER_LEADER_ELECTION_LEASE_DURATION_S": str(LEASE_DURATION_S),
    "CDO_DOMAIN_CONTROLLER_LEADER_ELECTION_RENEW_DEADLINE_S": "1.5",
    "CDO_DOMAIN_CONTROLLER_LEADER_ELECTION_RETRY_PERIOD_S": "0.2",
    "CDO_DOMAIN_CONTROLLER_INFORMER_BACKOFF_INITIAL_S": "0.05",
    "CDO_DOMAIN_CONTROLLER_INFORMER_BACKOFF_MAX_S": "0.5",
    "CDO_DOMAIN_CONTROLLER_RETRIES_BACKOFF_MAX_S": "0.5",
    "CDO_SHUTDOWN_STEP_TIMEOUT_S": "3",
}


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, ""


class Controller:
    """One domain controller process and its probe port."""

    def __init__(self, process: ProgramProcess, port: int) -> None:
        self.process = process
        self.port = port

    @property
    def instance(self) -> str:
        return self.process.env["CDO_INSTANCE"]

    async def metrics(self) -> str:
        status, body = await asyncio.to_thread(http_get, self.port, "/metrics")
        return body if status == 200 else ""

    async def ready(self) -> bool:
        status, _ = await asyncio.to_thread(http_get, self.port, "/readyz")
        return status == 200

    async def wait_ready(self, within_s: float = 20.0) -> None:
        async def probe() -> bool:
            if self.process.returncode is not None:
                raise AssertionError(
                    f"{self.instance} exited with {self.process.returncode}:\n"
                    + self.process.stderr_text()[-3000:]
                )
            return await self.ready()

        await wait_for(probe, timeout=within_s, what=f"{self.instance} ready")

    async def counter(self, name: str, /, **labels: str) -> float:
        """Sum of a metric's samples whose labels include ``labels``."""
        total = 0.0
        for line in (await self.metrics()).splitlines():
            if not line.startswith(name + "{") and not line.startswith(name + " "):
                continue
            found = dict(re.findall(r'(\w+)="([^"]*)"', line.split(" ")[0]))
            if all(found.get(k) == v for k, v in labels.items()):
                total += float(line.rsplit(" ", 1)[1])
        return total

    async def wait_idle(self, within_s: float = 15.0) -> None:
        """Until the domain queue is empty, nothing is in flight, and no key was added since
        the previous look: the controller has nothing left to do about what it saw."""
        seen: list[float] = []

        async def probe() -> bool:
            depth = await self.counter("workqueue_depth", name="computedomains")
            busy = await self.counter("workqueue_unfinished_work_seconds", name="computedomains")
            adds = await self.counter("workqueue_adds_total", name="computedomains")
            idle = depth == 0 and busy == 0 and bool(seen) and seen[-1] == adds
            seen.append(adds)
            return idle

        await wait_for(probe, timeout=within_s, interval=0.1, what=f"{self.instance} idle")

    def kill(self) -> None:
        self.process.process.kill()
        self.process.process.wait(10)

    def stop(self) -> None:
        self.process.stop()


ControllerFactory = Callable[..., Controller]


async def step(
    controller: Controller, membership: MembershipLog, name: str, *, before: int, phase: str
) -> DomainMembershipChanged:
    """Wait for the event a change causes, let the controller finish, and check it was the
    only one and that the KV snapshot says the same."""
    events = await wait_for(
        lambda: membership.of(name)[before:] or None, what=f"{phase} event of {name}"
    )
    await controller.wait_idle()
    events = membership.of(name)[before:]
    assert [e.phase for e in events] == [phase], [(e.phase, e.reason) for e in events]
    (event,) = events
    snapshot = await wait_for(
        lambda: _snapshot_is(membership, name, event), what="KV snapshot of the latest event"
    )
    assert snapshot.id == event.id
    return event


async def _snapshot_is(
    membership: MembershipLog, name: str, event: DomainMembershipChanged
) -> DomainMembershipChanged | None:
    snapshot = await membership.snapshot(name)
    return snapshot if snapshot is not None and snapshot.id == event.id else None


@pytest.fixture
async def crds(kube_client: KubeClient) -> AsyncIterator[None]:
    """cdo's CRDs, installed from the same source as the committed YAML, the ComputeDomain
    converted by cdo's webhook (the allocator serves it on a cluster)."""
    async with conversion_webhook() as webhook:
        await install_crds(kube_client, webhook.crds())
        yield


@pytest.fixture
def cluster(kube_client: KubeClient, crds: None) -> Cluster:
    return Cluster(kube_client)


@pytest.fixture
async def membership(bus_factory: BusFactory) -> MembershipLog:
    return await MembershipLog(await bus_factory("observer")).start()


@pytest.fixture
async def start_controller(
    emulator: KubeServer, service_env: dict[str, str], tmp_path: Path
) -> AsyncIterator[ControllerFactory]:
    """Start domain controller processes; every one is stopped at the end."""
    started: list[Controller] = []

    def start(instance: str = "dc-0", **extra: str) -> Controller:
        port = int(service_env["CDO_HTTP_PORT"]) if not started else free_port()
        env = {
            **service_env,
            **FAST_SETTINGS,
            "CDO_HTTP_PORT": str(port),
            "CDO_INSTANCE": instance,
            "CDO_DOMAIN_CONTROLLER_KUBECONFIG": str(emulator.kubeconfig),
            **extra,
        }
        process = ProgramProcess(
            "services.domain_controller",
            env=env,
            workdir=tmp_path,
            name=f"{instance}-{len(started)}",
        ).start()
        controller = Controller(process, port)
        started.append(controller)
        return controller

    yield start
    # Stopping waits for the process; the emulator it talks to runs on this event loop.
    await asyncio.gather(*(asyncio.to_thread(c.stop) for c in started))


@pytest.fixture
async def controller(start_controller: ControllerFactory, crds: None) -> Controller:
    """One running, ready domain controller."""
    running = start_controller()
    await running.wait_ready()
    return running
