"""NVIDIA's device plugin on one node: NVML's GPUs as ``nvidia.com/gpu``, health from XIDs.

``run()`` waits for the kubelet's ``device-plugins/kubelet.sock``, then starts the plugin:
reads the GPUs' UUIDs from NVML (in the node's NVML context), serves ``v1beta1.DevicePlugin``
on ``device-plugins/nvidia-gpu.sock``, registers it for ``nvidia.com/gpu`` (with
GetPreferredAllocation offered, as NVIDIA's does) and watches NVML's XID events, which mark
their GPU Unhealthy (:mod:`sim.deviceplugin.health`) in the ListAndWatch stream. When
``kubelet.sock`` is created anew (a kubelet restart, which also removes the plugin's socket),
the plugin starts again, as NVIDIA's does on its inotify event: every GPU listed afresh,
healthy; :meth:`NvidiaDevicePlugin.restart` does the same (a restart of the plugin's pod). A
registration that fails is tried again, from the start, after ``retry_s``.

Allocate answers each container with ``NVIDIA_VISIBLE_DEVICES`` = its GPUs' UUIDs (the
default ``envvar`` device list strategy); a device the plugin does not have is refused.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pynvml

from shared.kubeletapi.deviceplugin import (
    DEVICE_PLUGIN_DIR,
    KUBELET_SOCKET_NAME,
    UNHEALTHY,
    VERSION,
    ContainerAllocation,
    Device,
    DevicePluginError,
    PluginOptions,
    PreferredRequest,
    Registration,
)
from shared.kubeletapi.deviceplugin_rpc import DevicePluginServer, register
from shared.nvml import NvmlError, PynvmlNvml, subscribed, watch_events
from sim.deviceplugin.health import all_unhealthy, device_list, makes_unhealthy
from sim.gpudriver.inventory import read_gpus

log = logging.getLogger("cdo.sim.deviceplugin")

RESOURCE = "nvidia.com/gpu"
SOCKET_NAME = "nvidia-gpu.sock"
VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"


def _identity(path: Path) -> tuple[int, int] | None:
    """What tells one kubelet.sock from the next (inode, change time), None when absent."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return (stat.st_ino, stat.st_ctime_ns)


class NvidiaDevicePlugin:
    """NVIDIA's device plugin as the simulator runs it; see the module docstring."""

    def __init__(
        self, *, kubelet_root: Path, watch_interval_s: float = 0.2, retry_s: float = 1.0
    ) -> None:
        self.directory = kubelet_root / DEVICE_PLUGIN_DIR
        self.kubelet_socket = self.directory / KUBELET_SOCKET_NAME
        self.socket = self.directory / SOCKET_NAME
        self._watch_interval_s = watch_interval_s
        self._retry_s = retry_s
        self.uuids: tuple[str, ...] = ()
        self._health: dict[str, str] = {}
        self._changed = asyncio.Event()
        self.registered = False
        self._restart_requested = False
        self.starts = 0
        """How often the plugin started (the first start included)."""

    def devices(self) -> list[Device]:
        return device_list(self.uuids, self._health)

    def restart(self) -> None:
        """Start the plugin again (what an operator does after a GPU reset, so that the reset
        GPU is listed healthy again: the plugin never marks a GPU healthy by itself)."""
        self._restart_requested = True

    # -- the plugin's life --------------------------------------------------------------------

    async def run(self) -> None:
        """Start whenever a kubelet socket appears; start again when it is replaced."""
        while True:
            identity = await self._kubelet_socket()
            serving = asyncio.create_task(self._serve(), name=f"{self.socket} plugin")
            try:
                # Polled: the stand-in for the inotify watch NVIDIA's plugin keeps.
                while not serving.done() and not self._must_restart(identity):
                    await asyncio.wait([serving], timeout=self._watch_interval_s)
            finally:
                serving.cancel()
                await asyncio.wait([serving])
            self._restart_requested = False
            if not serving.cancelled() and (failure := serving.exception()) is not None:
                raise failure
            log.info("kubelet socket created anew or restart asked; the plugin starts again")

    async def _kubelet_socket(self) -> tuple[int, int]:
        # Polled: the stand-in for the inotify watch NVIDIA's plugin keeps on the directory.
        while (identity := _identity(self.kubelet_socket)) is None:  # noqa: ASYNC110
            await asyncio.sleep(self._watch_interval_s)
        return identity

    def _must_restart(self, identity: tuple[int, int]) -> bool:
        """A restart was asked for, or kubelet.sock is another one than ``identity``."""
        return self._restart_requested or _identity(self.kubelet_socket) not in (identity, None)

    async def _serve(self) -> None:
        self.uuids = tuple(gpu.uuid for gpu in await asyncio.to_thread(read_gpus))
        self._health = {}
        self._notify()
        self.starts += 1
        server = DevicePluginServer(self.socket, self)
        await server.start()
        try:
            registration = Registration(
                version=VERSION,
                endpoint=SOCKET_NAME,
                resource_name=RESOURCE,
                options=self.options(),
            )
            try:
                await register(self.kubelet_socket, registration)
            except DevicePluginError as exc:
                log.warning("could not register with the kubelet", extra={"error": str(exc)})
                await asyncio.sleep(self._retry_s)
                return  # run() starts the plugin again
            self.registered = True
            log.info("device plugin registered", extra={"gpus": len(self.uuids)})
            await self._check_health()
        finally:
            self.registered = False
            await server.stop()

    # -- health ---------------------------------------------------------------------------------

    async def _check_health(self) -> None:
        """Mark GPUs Unhealthy on XIDs, every GPU when the event wait fails; then idle."""
        nvml = PynvmlNvml()
        await asyncio.to_thread(nvml.init)
        try:
            async with subscribed(nvml, event_types=pynvml.nvmlEventTypeXidCriticalError) as events:
                async for event in watch_events(events):
                    xid, gpu = event.xid, event.gpu_index
                    if xid is None or gpu is None or not makes_unhealthy(xid):
                        continue
                    if 0 <= gpu < len(self.uuids):
                        log.info("GPU marked unhealthy", extra={"gpu": gpu, "xid": xid})
                        self._health[self.uuids[gpu]] = UNHEALTHY
                        self._notify()
        except NvmlError as exc:
            log.warning("NVML event wait failed; every GPU unhealthy", extra={"error": str(exc)})
            self._health = all_unhealthy(self.uuids)
            self._notify()
        finally:
            await asyncio.to_thread(nvml.shutdown)
        await asyncio.Event().wait()  # nothing turns a GPU healthy again but a restart

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    # -- DevicePluginHandler ----------------------------------------------------------------------

    def options(self) -> PluginOptions:
        return PluginOptions(get_preferred_allocation_available=True)

    async def list_and_watch(self) -> AsyncIterator[Sequence[Device]]:
        while True:
            changed = self._changed
            yield self.devices()
            await changed.wait()

    async def preferred_allocation(
        self, requests: Sequence[PreferredRequest]
    ) -> list[tuple[str, ...]]:
        """The devices that must be included, then the available ones in NVML index order (on
        an NVL72 tray every GPU reaches every other over NVLink alike)."""
        order = {uuid: index for index, uuid in enumerate(self.uuids)}
        answers: list[tuple[str, ...]] = []
        for request in requests:
            rest = sorted(
                set(request.available) - set(request.must_include),
                key=lambda d: order.get(d, len(order)),
            )
            answers.append((*request.must_include, *rest)[: request.size])
        return answers

    async def allocate(self, requests: Sequence[tuple[str, ...]]) -> list[ContainerAllocation]:
        answers: list[ContainerAllocation] = []
        for ids in requests:
            unknown = [device for device in ids if device not in self.uuids]
            if unknown:
                raise ValueError(
                    f"invalid allocation request for {RESOURCE!r}: unknown device: {unknown[0]}"
                )
            answers.append(ContainerAllocation(envs={VISIBLE_DEVICES: ",".join(ids)}))
        return answers
