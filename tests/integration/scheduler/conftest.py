"""A running scheduler against the API emulator, with short backoffs so tests stay fast."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from shared.kube.client import KubeClient
from shared.kube.informer import InformerSettings
from sim.release import DeviceTaintSupport
from sim.scheduler import Scheduler, SchedulerSettings

FAST = SchedulerSettings(
    backoff_initial_s=0.05,
    backoff_max_s=0.2,
    informer=InformerSettings(backoff_initial_s=0.05, backoff_max_s=0.5),
)


@pytest.fixture
def scheduler_settings() -> SchedulerSettings:
    """Override in a module to change the scheduler's settings."""
    return FAST


@pytest.fixture
def device_taints() -> DeviceTaintSupport:
    """The release's device taints (the newest's); parametrize with ``emulator_config``."""
    return DeviceTaintSupport()


@pytest.fixture
async def scheduler(
    kube_client: KubeClient,
    scheduler_settings: SchedulerSettings,
    device_taints: DeviceTaintSupport,
) -> AsyncIterator[Scheduler]:
    scheduler = Scheduler(kube_client, settings=scheduler_settings, device_taints=device_taints)
    task = asyncio.create_task(scheduler.run())
    await asyncio.wait_for(scheduler.wait_ready(), timeout=10)
    yield scheduler
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
