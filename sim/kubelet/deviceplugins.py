"""The kubelet's side of the device plugin API: Registration, ListAndWatch, Allocate.

    plugins = DevicePlugins(directory=root / "device-plugins", devices=manager, call_timeout=10)
    group.create_task(plugins.run())         # serves kubelet.sock until cancelled
    record = await plugins.allocate(key, pod) # the device manager's admission, with Allocate

``run`` empties the directory (sockets a previous run left, as the real kubelet removes them
at start) and serves ``v1beta1.Registration`` on ``kubelet.sock`` in it; plugins watching
for that socket's creation register again, as NVIDIA's does. A registration is checked
(version ``v1beta1``; resource ``nvidia.com/gpu``, the only one this device manager keeps,
where a real kubelet takes any extended resource; endpoint a socket name in the directory)
and refused with a message otherwise. The kubelet then reads the plugin's ListAndWatch
stream: every list replaces the device manager's devices and their health. A new registration
for the resource replaces the plugin before it; when the current plugin's stream ends, every
device turns Unhealthy until a plugin registers again.

When the device manager gives devices to a container, the plugin's ``Allocate`` is called
with them, one container per call, and its answer (environment, mounts, CDI devices) kept
with the assignment. A failed Allocate gives the devices back and fails the pod's admission
(shown on the pod and retried). The kubelet asks for no preferred allocation and calls no
PreStartContainer.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from shared.kube.keys import ObjectKey
from shared.kubeletapi.deviceplugin import (
    KUBELET_SOCKET_NAME,
    VERSION,
    DevicePluginError,
    Registration,
)
from shared.kubeletapi.deviceplugin_rpc import (
    DevicePluginClient,
    RegistrationRefusedError,
    RegistrationServer,
)
from sim.kubelet.devices import DeviceAllocationError, DeviceManager, PodDevices
from sim.kubelet.models import Pod

log = logging.getLogger("cdo.sim.kubelet.deviceplugins")


def refusal(registration: Registration, *, resource: str) -> str | None:
    """Why the kubelet refuses ``registration``, or None when it takes it."""
    if registration.version != VERSION:
        return (
            f"requested device plugin version {registration.version!r} is not supported; "
            f"supported versions: [{VERSION}]"
        )
    if registration.resource_name != resource:
        return f"resource {registration.resource_name!r} is not served here; only {resource!r}"
    endpoint = registration.endpoint
    if not endpoint or "/" in endpoint or endpoint in (".", "..", KUBELET_SOCKET_NAME):
        return f"endpoint {endpoint!r} must be a socket name in the device-plugins directory"
    return None


class _Endpoint:
    """One registered plugin: its connection and the task reading its ListAndWatch."""

    def __init__(self, registration: Registration, client: DevicePluginClient) -> None:
        self.registration = registration
        self.client = client
        self.task: asyncio.Task[None] | None = None


class DevicePlugins:
    """Device plugin registrations of one kubelet session; see the module docstring."""

    def __init__(self, *, directory: Path, devices: DeviceManager, call_timeout: float) -> None:
        self.directory = directory
        self.socket = directory / KUBELET_SOCKET_NAME
        self._devices = devices
        self._call_timeout = call_timeout
        self._endpoint: _Endpoint | None = None
        self._group: asyncio.TaskGroup | None = None
        self.registrations = 0
        """Registrations accepted in this session."""

    @property
    def registered(self) -> bool:
        """A plugin is registered and its stream has not ended."""
        return self._endpoint is not None

    async def run(self) -> None:
        self._clear_directory()
        server = RegistrationServer(self.socket, self._register)
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                await server.start()
                await asyncio.Event().wait()  # until the session is cancelled
        finally:
            self._group = None
            await server.stop()
            endpoint, self._endpoint = self._endpoint, None
            if endpoint is not None:
                await endpoint.client.close()

    def _clear_directory(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        for path in self.directory.iterdir():
            if not path.is_dir():
                path.unlink(missing_ok=True)

    async def _register(self, registration: Registration) -> None:
        reason = refusal(registration, resource=self._devices.resource)
        if reason is not None or self._group is None:
            log.warning("device plugin refused", extra={"reason": reason})
            raise RegistrationRefusedError(reason or "the kubelet is stopping")
        client = DevicePluginClient(
            self.directory / registration.endpoint, call_timeout=self._call_timeout
        )
        endpoint = _Endpoint(registration, client)
        previous, self._endpoint = self._endpoint, endpoint
        if previous is not None:
            await self._drop(previous)
        endpoint.task = self._group.create_task(
            self._watch(endpoint), name=f"device plugin {registration.endpoint}"
        )
        self.registrations += 1
        log.info(
            "device plugin registered",
            extra={"resource": registration.resource_name, "endpoint": registration.endpoint},
        )

    async def _drop(self, endpoint: _Endpoint) -> None:
        if endpoint.task is not None:
            endpoint.task.cancel()
        await endpoint.client.close()

    async def _watch(self, endpoint: _Endpoint) -> None:
        try:
            async for devices in endpoint.client.list_and_watch():
                if self._endpoint is endpoint:
                    self._devices.update(devices)
        except DevicePluginError as exc:
            log.warning("device plugin stream ended", extra={"error": str(exc)})
        if self._endpoint is endpoint:  # not replaced meanwhile: the resource has no plugin
            self._endpoint = None
            self._devices.plugin_gone()
            await endpoint.client.close()

    async def allocate(self, key: ObjectKey, pod: Pod) -> PodDevices:
        """The pod's devices (DeviceAllocationError), each container's Allocate answered."""
        record = self._devices.allocate(key, pod)
        endpoint = self._endpoint
        missing = [c for c in record.containers if c not in record.allocations]
        if endpoint is None or not missing:
            return record
        try:
            for container in missing:
                (answer,) = await endpoint.client.allocate([record.containers[container]])
                record.allocations[container] = answer
        except (DevicePluginError, ValueError) as exc:
            self._devices.free(key)
            raise DeviceAllocationError(f"Allocate failed: {exc}") from exc
        return record
