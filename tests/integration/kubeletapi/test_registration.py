"""Plugin registration over real unix sockets: discovery, verdicts, deregistration."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from shared.kubeletapi import (
    DRA_V1,
    DRA_V1BETA1,
    PluginInfo,
    PluginNotRegisteredError,
    PluginWatcher,
    RegisteredPlugin,
    RegistrationStatus,
)
from shared.kubeletapi.bindings import registration_service_handler
from shared.kubeletapi.registration_service import RegistrationServicer
from shared.kubeletapi.sockets import unix_address
from tests.integration.kubeletapi.helpers import (
    DRIVER,
    ChannelDriver,
    claim,
    plugin_for,
    running_watcher,
)
from tests.support.wait import wait_for


async def test_plugin_registers_and_hears_the_verdict(
    node_root: Path, driver: ChannelDriver, watcher: PluginWatcher
) -> None:
    async with plugin_for(node_root, driver) as plugin:
        assert not plugin.registered
        await wait_for(lambda: plugin.registered, what="registration verdict")

        assert plugin.registration_status == RegistrationStatus(registered=True)
        assert watcher.plugins == {
            DRIVER: RegisteredPlugin(
                driver_name=DRIVER,
                endpoint=str(node_root / "plugins" / DRIVER / "dra.sock"),
                service=DRA_V1,
                registration_socket=str(node_root / "plugins_registry" / f"{DRIVER}-reg.sock"),
            )
        }


async def test_plugin_started_before_the_kubelet_is_found(
    node_root: Path, driver: ChannelDriver
) -> None:
    async with (
        plugin_for(node_root, driver) as plugin,
        running_watcher(node_root) as watcher,
    ):
        await wait_for(lambda: DRIVER in watcher.plugins, what="registration")
        assert plugin.registered


async def test_plugin_without_a_common_version_is_refused(
    node_root: Path, driver: ChannelDriver
) -> None:
    async with (
        running_watcher(node_root, supported_services=[DRA_V1BETA1]) as watcher,
        plugin_for(node_root, driver, dra_services=[DRA_V1]) as plugin,
    ):
        status = await wait_for(lambda: plugin.registration_status, what="verdict")

        assert not status.registered
        assert DRA_V1 in status.error
        assert DRIVER not in watcher.plugins


async def test_endpoint_that_does_not_answer_is_refused(node_root: Path) -> None:
    registration_socket = node_root / "plugins_registry" / "ghost-reg.sock"
    registration_socket.parent.mkdir(parents=True)
    servicer = RegistrationServicer(
        PluginInfo(
            plugin_type="DRAPlugin",
            name="ghost.cdo.test",
            endpoint=str(node_root / "nothing-listens-here.sock"),
            supported_versions=(DRA_V1,),
        )
    )
    server = grpc.aio.server(
        handlers=[
            registration_service_handler(
                get_info=servicer.get_info, notify=servicer.notify_registration_status
            )
        ]
    )
    server.add_insecure_port(unix_address(registration_socket))
    await server.start()
    try:
        async with running_watcher(node_root, registration_timeout=0.3) as watcher:
            status = await wait_for(lambda: servicer.status, what="verdict")

            assert not status.registered
            assert "does not answer" in status.error
            assert "ghost.cdo.test" not in watcher.plugins
    finally:
        await server.stop(None)


async def test_vanished_registration_socket_deregisters_the_plugin(
    node_root: Path, driver: ChannelDriver, watcher: PluginWatcher
) -> None:
    async with plugin_for(node_root, driver) as plugin:
        await wait_for(lambda: DRIVER in watcher.plugins, what="registration")

        await asyncio.to_thread(Path(watcher.plugins[DRIVER].registration_socket).unlink)

        await wait_for(lambda: DRIVER not in watcher.plugins, what="deregistration")
        with pytest.raises(PluginNotRegisteredError):
            watcher.client(DRIVER)
        assert plugin.registered  # the kubelet does not tell a plugin it lost track of it


async def test_stopped_plugin_deregisters_and_a_restarted_one_serves_again(
    node_root: Path, driver: ChannelDriver, watcher: PluginWatcher
) -> None:
    async with plugin_for(node_root, driver):
        await wait_for(lambda: DRIVER in watcher.plugins, what="registration")
        stale_client = watcher.client(DRIVER)
    await wait_for(lambda: DRIVER not in watcher.plugins, what="deregistration")
    with pytest.raises(PluginNotRegisteredError):
        await stale_client.prepare([claim("before-restart")])

    async with plugin_for(node_root, driver) as restarted:
        await wait_for(lambda: restarted.registered, what="registration after restart")
        results = await watcher.client(DRIVER).prepare([claim("after-restart")])

    assert results["uid-after-restart"].ok
