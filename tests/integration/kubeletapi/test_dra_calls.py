"""NodePrepareResources / NodeUnprepareResources from the kubelet side to a real plugin."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from shared.kubeletapi import (
    DRA_V1BETA1,
    KubeletPlugin,
    PluginCallError,
    PluginNotRegisteredError,
    PluginWatcher,
    PreparedDevice,
    UnprepareResult,
)
from tests.integration.kubeletapi.helpers import (
    DRIVER,
    ChannelDriver,
    claim,
    plugin_for,
    running_watcher,
)
from tests.support.wait import wait_for


@pytest.fixture
async def plugin(
    node_root: Path, driver: ChannelDriver, watcher: PluginWatcher
) -> AsyncIterator[KubeletPlugin]:
    async with plugin_for(node_root, driver) as running:
        await wait_for(lambda: DRIVER in watcher.plugins, what="registration")
        yield running


@pytest.mark.usefixtures("plugin")
async def test_prepare_returns_the_cdi_device_ids(
    driver: ChannelDriver, watcher: PluginWatcher
) -> None:
    claims = [claim("trainer-0"), claim("trainer-1", namespace="team-b")]

    results = await watcher.client(DRIVER).prepare(claims)

    assert results["uid-trainer-0"].cdi_device_ids == ("cdo.test/channel=team-a.trainer-0",)
    assert results["uid-trainer-1"].cdi_device_ids == ("cdo.test/channel=team-b.trainer-1",)
    assert results["uid-trainer-0"].devices == (
        PreparedDevice(
            pool_name="node-0",
            device_name="channel-0",
            cdi_device_ids=("cdo.test/channel=team-a.trainer-0",),
            request_names=("imex",),
        ),
    )
    assert set(driver.prepared) == {"uid-trainer-0", "uid-trainer-1"}


async def test_kubelet_that_speaks_only_v1beta1_is_served(
    node_root: Path, driver: ChannelDriver
) -> None:
    async with (
        running_watcher(node_root, supported_services=[DRA_V1BETA1]) as watcher,
        plugin_for(node_root, driver) as plugin,
    ):
        await wait_for(lambda: plugin.registered, what="registration")
        assert watcher.plugins[DRIVER].service == DRA_V1BETA1

        results = await watcher.client(DRIVER).prepare([claim("legacy")])

    assert results["uid-legacy"].cdi_device_ids == ("cdo.test/channel=team-a.legacy",)


@pytest.mark.usefixtures("plugin")
async def test_a_claim_the_handler_refuses_fails_alone(
    driver: ChannelDriver, watcher: PluginWatcher
) -> None:
    driver.refused.add("foreign")

    results = await watcher.client(DRIVER).prepare([claim("foreign"), claim("own")])

    assert results["uid-foreign"].error == "claim foreign refused"
    assert results["uid-foreign"].devices == ()
    assert results["uid-own"].ok
    assert set(driver.prepared) == {"uid-own"}


@pytest.mark.usefixtures("plugin")
async def test_a_handler_exception_fails_every_claim_of_the_call(
    driver: ChannelDriver, watcher: PluginWatcher
) -> None:
    driver.outage = "IMEX daemon not ready"

    results = await watcher.client(DRIVER).prepare([claim("a"), claim("b")])

    assert {uid: result.error for uid, result in results.items()} == {
        "uid-a": "prepare failed: IMEX daemon not ready",
        "uid-b": "prepare failed: IMEX daemon not ready",
    }


@pytest.mark.usefixtures("plugin")
async def test_a_claim_left_out_of_the_response_counts_as_failed(
    driver: ChannelDriver, watcher: PluginWatcher
) -> None:
    driver.ignored.add("forgotten")

    results = await watcher.client(DRIVER).prepare([claim("forgotten"), claim("kept")])

    assert "no result for claim team-a/forgotten" in results["uid-forgotten"].error
    assert results["uid-kept"].ok


@pytest.mark.usefixtures("plugin")
async def test_unprepare_releases_what_prepare_made(
    driver: ChannelDriver, watcher: PluginWatcher
) -> None:
    claims = [claim("a"), claim("b")]
    await watcher.client(DRIVER).prepare(claims)

    results = await watcher.client(DRIVER).unprepare(claims)

    assert results == {"uid-a": UnprepareResult(), "uid-b": UnprepareResult()}
    assert driver.prepared == {}


async def test_a_call_past_its_deadline_raises(node_root: Path, driver: ChannelDriver) -> None:
    driver.stalled = True
    async with (
        running_watcher(node_root, call_timeout=0.2) as watcher,
        plugin_for(node_root, driver, stop_grace=0) as plugin,
    ):
        await wait_for(lambda: plugin.registered, what="registration")

        with pytest.raises(PluginCallError) as failure:
            await watcher.client(DRIVER).prepare([claim("slow")])

    assert failure.value.code == "DEADLINE_EXCEEDED"
    assert failure.value.method == "NodePrepareResources"


async def test_a_driver_without_a_plugin_cannot_be_called(watcher: PluginWatcher) -> None:
    with pytest.raises(PluginNotRegisteredError, match=r"other\.cdo\.test"):
        watcher.client("other.cdo.test")
