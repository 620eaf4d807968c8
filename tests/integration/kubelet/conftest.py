"""Fixtures for kubelet tests: fast settings, short node roots, a DRA plugin, running kubelets."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest

from shared.kube.client import KubeClient
from shared.kube.informer import InformerSettings
from sim.kubeapi import ServerConfig
from sim.kubelet import KubeletSettings, SimulatedKubelet
from sim.topology import Cluster, parse_topology
from tests.integration.kubelet.helpers import RecordingDriver, plugin_for, running

FAST = KubeletSettings(
    lease_duration_s=1,
    heartbeat_interval_s=0.2,
    status_update_interval_s=0.5,
    status_report_interval_s=5.0,
    retry_backoff_s=0.05,
    retry_backoff_max_s=0.5,
    plugin_scan_interval_s=0.05,
    plugin_call_timeout_s=5.0,
)
FAST_INFORMERS = InformerSettings(backoff_initial_s=0.05, backoff_max_s=0.5)


@pytest.fixture
def emulator_config() -> ServerConfig:
    # Bound pods are deleted gracefully, as on a real cluster: the kubelet finishes the job.
    # Short pod toleration times, so that eviction after a node goes away happens within a test.
    return ServerConfig(
        bookmark_interval_s=0.5, pod_graceful_deletion=True, default_toleration_seconds=1
    )


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    return parse_topology(
        "name: kubelet-test\nnodes_per_rack: 2\naddress_base: 127.42.0.0\nracks:\n  - name: r0\n"
    )


@pytest.fixture
def node_roots(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """A short root directory per node name (unix socket paths are limited to 107 bytes)."""
    roots: dict[str, Path] = {}

    def root(name: str) -> Path:
        if name not in roots:
            roots[name] = tmp_path_factory.mktemp("n")
        return roots[name]

    return root


@pytest.fixture
def driver() -> RecordingDriver:
    return RecordingDriver()


KubeletFactory = Callable[..., AbstractAsyncContextManager[SimulatedKubelet]]


@pytest.fixture
def kubelet_on(
    kube_client: KubeClient,
    cluster: Cluster,
    node_roots: Callable[[str], Path],
    driver: RecordingDriver,
) -> KubeletFactory:
    """``async with kubelet_on(index) as kubelet``: node ``index`` with its kubelet and plugin."""

    @contextlib.asynccontextmanager
    async def start(
        index: int = 0, *, settings: KubeletSettings = FAST, plugin: bool = True
    ) -> AsyncIterator[SimulatedKubelet]:
        node = cluster.nodes[index]
        root = node_roots(node.name)
        kubelet = SimulatedKubelet(
            node,
            client=kube_client,
            plugins_dir=root / "plugins_registry",
            settings=settings,
            informer_settings=FAST_INFORMERS,
        )
        async with contextlib.AsyncExitStack() as stack:
            if plugin:
                await stack.enter_async_context(plugin_for(root, driver))
            await stack.enter_async_context(running(kubelet.run(), f"kubelet {node.name}"))
            yield kubelet

    return start
