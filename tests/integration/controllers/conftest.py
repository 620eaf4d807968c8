"""The simulated controllers running against the API emulator over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from shared.kube.client import KubeClient
from shared.kube.informer import InformerSettings
from shared.kube.ratelimit import RateLimitSettings
from sim.controllers import ControllerManager, ControllerSettings
from sim.kubeapi import ServerConfig
from sim.release import DeviceTaintSupport
from tests.integration.controllers.cluster import Cluster

# Short pauses so that recovering from injected faults takes milliseconds, not seconds.
FAST = ControllerSettings(
    informer=InformerSettings(backoff_initial_s=0.02, backoff_max_s=0.2),
    rate_limit=RateLimitSettings(backoff_base_s=0.01, backoff_max_s=0.2),
)


@pytest.fixture
def emulator_config() -> ServerConfig:
    return ServerConfig(bookmark_interval_s=0.2)


@pytest.fixture
def device_taints() -> DeviceTaintSupport:
    """The release's device taints (the newest's); parametrize with ``emulator_config``."""
    return DeviceTaintSupport()


@pytest.fixture
async def controllers(
    kube_client: KubeClient, device_taints: DeviceTaintSupport
) -> AsyncIterator[ControllerManager]:
    manager = ControllerManager(kube_client, settings=FAST, device_taints=device_taints)
    async with manager.running():
        yield manager


@pytest.fixture
def cluster(kube_client: KubeClient) -> Cluster:
    return Cluster(kube_client)
