"""Optional APIs against the emulator over HTTP: an informer of an API the server does not serve
is synced and empty, picks the API up when it appears and lets it go when it goes; discovery
that cannot be asked is not an API that is missing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from shared.kube.apis import DEVICE_TAINT_RULES_API, serves
from shared.kube.client import KubeClient
from shared.kube.informer import Informer, InformerSettings
from shared.kube.informers import InformerSet
from shared.kube.models import DeviceTaintRule
from shared.kube.presence import ApiPresence
from shared.kube.resources import CONFIG_MAPS, DEVICE_TAINT_RULES
from shared.metrics import Metrics
from sim.kubeapi import KubeServer, ServerConfig, serve
from tests.support.wait import wait_for

FAST = InformerSettings(backoff_initial_s=0.05, backoff_max_s=0.2, optional_api_recheck_s=0.2)
RULES = ("resource.k8s.io", "v1", "devicetaintrules")


class Running:
    def __init__(
        self, caches: InformerSet, informer: Informer[DeviceTaintRule], metrics: Metrics
    ) -> None:
        self.caches = caches
        self.informer = informer
        self.metrics = metrics
        self.changes: list[tuple[str, str]] = []
        informer.add_handler(self._record)

    def _record(self, old: DeviceTaintRule | None, new: DeviceTaintRule | None) -> None:
        if new is None:
            assert old is not None
            self.changes.append(("deleted", old.metadata.name))
        else:
            self.changes.append(("added" if old is None else "updated", new.metadata.name))

    @property
    def served_gauge(self) -> float | None:
        return self.metrics.registry.get_sample_value(
            "cdo_optional_api_served", {"api": DEVICE_TAINT_RULES_API.name}
        )

    @property
    def names(self) -> set[str]:
        return {rule.metadata.name for rule in self.informer.cache.objects()}


def stop_serving(emulator: KubeServer) -> Any:
    """What a server without DeviceTaintRule (a release before 1.37) serves: kept to put back."""
    registry = emulator.api.registry
    kept = registry.get(*RULES)
    registry.remove(*RULES)
    return kept


def rule(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": {
            "deviceSelector": {"driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"},
            "taint": {"key": "example.com/fault", "value": "x", "effect": "NoSchedule"},
        },
    }


@pytest.fixture
async def start(kube_client: KubeClient) -> AsyncIterator[Any]:
    tasks: list[asyncio.Task[None]] = []

    def make() -> Running:
        metrics = Metrics()
        caches = InformerSet(kube_client, settings=FAST, metrics=metrics)
        informer = caches.informer(
            DEVICE_TAINT_RULES, DeviceTaintRule, namespace="", optional=DEVICE_TAINT_RULES_API
        )
        presence = caches.presence(DEVICE_TAINT_RULES_API)
        tasks.append(asyncio.create_task(presence.run()))
        tasks.append(asyncio.create_task(informer.run()))
        return Running(caches, informer, metrics)

    yield make
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_an_api_the_server_does_not_serve_leaves_its_informer_synced_and_empty(
    emulator: KubeServer, kube_client: KubeClient, start: Any
) -> None:
    stop_serving(emulator)
    assert not await serves(kube_client, DEVICE_TAINT_RULES)
    running = start()
    await wait_for(lambda: running.caches.synced, what="caches synced without the API")
    assert running.informer.synced
    assert len(running.informer.cache) == 0
    assert running.served_gauge == 0
    # A service's other informers still work: the 404 of one resource holds up nothing else.
    assert await serves(kube_client, CONFIG_MAPS)


async def test_an_api_that_appears_later_is_listed_and_watched_without_a_restart(
    emulator: KubeServer, kube_client: KubeClient, start: Any
) -> None:
    kept = stop_serving(emulator)
    running = start()
    await wait_for(lambda: running.caches.synced, what="synced without the API")
    emulator.api.registry.add(kept)  # the upgrade
    await kube_client.create(DEVICE_TAINT_RULES, rule("r1"))
    await wait_for(lambda: running.names == {"r1"}, what="the rule made after the upgrade")
    assert running.served_gauge == 1
    await kube_client.create(DEVICE_TAINT_RULES, rule("r2"))
    await wait_for(lambda: running.names == {"r1", "r2"}, what="watched from then on")


async def test_an_api_that_goes_away_is_done_without(
    emulator: KubeServer, kube_client: KubeClient, start: Any
) -> None:
    await kube_client.create(DEVICE_TAINT_RULES, rule("r1"))
    running = start()
    await wait_for(lambda: running.names == {"r1"}, what="the rule listed")
    assert running.served_gauge == 1
    stop_serving(emulator)
    emulator.faults.drop_watches()  # turning an API off restarts the server: watches end
    await wait_for(lambda: ("deleted", "r1") in running.changes, what="the rule let go")
    assert running.informer.synced and len(running.informer.cache) == 0
    assert running.served_gauge == 0


async def test_a_server_that_cannot_be_asked_is_not_one_without_the_api(
    tmp_path: Path,
) -> None:
    async with serve(config=ServerConfig(), kubeconfig=tmp_path / "kubeconfig") as gone:
        client = await KubeClient.connect(kubeconfig=gone.kubeconfig)
    try:
        presence = ApiPresence(
            client, DEVICE_TAINT_RULES_API, recheck_s=0.2, metrics=Metrics(), retry_s=0.05
        )
        task = asyncio.create_task(presence.run())
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(presence.wait_known(), timeout=0.5)
        assert not presence.known
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    finally:
        await client.close()
