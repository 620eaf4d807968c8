"""Kubelet side: finds DRA plugins in a plugins_registry directory and keeps a client for each.

    watcher = PluginWatcher(registry_dir=node_root / "plugins_registry")
    task_group.create_task(watcher.run())
    ...
    results = await watcher.client("compute-domain.cdo.dev").prepare(claims)

Discovery is a periodic scan of the directory (no inotify): every unix socket whose name does
not start with "." is a registration socket. A new socket goes through the kubelet's handshake:
GetInfo, admission (``admission.admit_plugin``), a connection to the announced endpoint, then
NotifyRegistrationStatus with the verdict. A socket that disappears, or is replaced by a new
socket at the same path (a restarted plugin), deregisters its plugin. A failed handshake is
retried after ``retry_interval`` while the same socket stays in place.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import grpc
import msgspec

from shared.errors import ConfigError
from shared.kubeletapi import bindings, convert
from shared.kubeletapi.admission import RegisteredPlugin, admit_plugin
from shared.kubeletapi.client import DEFAULT_CALL_TIMEOUT, DraPluginClient
from shared.kubeletapi.errors import PluginNotRegisteredError, RegistrationRejectedError
from shared.kubeletapi.messages import PluginInfo, RegistrationStatus
from shared.kubeletapi.sockets import unix_address
from shared.kubeletapi.versions import DRA_SERVICES, check_dra_services

log = logging.getLogger(__name__)


class _SocketIdentity(msgspec.Struct, frozen=True):
    """Tells a socket from a new one created at the same path."""

    inode: int
    changed_ns: int


class _Registration(msgspec.Struct, kw_only=True):
    identity: _SocketIdentity
    client: DraPluginClient


class _Failure(msgspec.Struct, frozen=True, kw_only=True):
    identity: _SocketIdentity
    retry_at: float


class PluginWatcher:
    """Registers the DRA plugins whose registration sockets appear in ``registry_dir``.

    ``supported_services`` are the DRA versions this kubelet speaks (newest first). When a driver
    has several registered plugins, calls go to the one registered last, as in the kubelet.
    """

    def __init__(
        self,
        *,
        registry_dir: Path,
        supported_services: Sequence[str] = DRA_SERVICES,
        scan_interval: float = 0.2,
        retry_interval: float = 1.0,
        registration_timeout: float = 5.0,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
    ) -> None:
        self._registry_dir = registry_dir
        self._supported_services = check_dra_services(supported_services)
        self._scan_interval = scan_interval
        self._retry_interval = retry_interval
        self._registration_timeout = registration_timeout
        self._call_timeout = call_timeout
        # Keyed by registration socket path; insertion order is registration order.
        self._registrations: dict[str, _Registration] = {}
        self._failures: dict[str, _Failure] = {}

    @property
    def plugins(self) -> dict[str, RegisteredPlugin]:
        """The plugin calls go to, per driver name."""
        return {
            registration.client.plugin.driver_name: registration.client.plugin
            for registration in self._registrations.values()
        }

    def client(self, driver_name: str) -> DraPluginClient:
        """The client of the driver's current plugin; PluginNotRegisteredError when it has none."""
        for registration in reversed(self._registrations.values()):
            if registration.client.plugin.driver_name == driver_name:
                return registration.client
        raise PluginNotRegisteredError(driver_name)

    async def run(self) -> None:
        """Scan every ``scan_interval`` until cancelled, then drop every plugin."""
        self._registry_dir.mkdir(parents=True, exist_ok=True)
        try:
            while True:
                await self.scan()
                await asyncio.sleep(self._scan_interval)
        finally:
            await self.close()

    async def scan(self) -> None:
        """One pass: deregister vanished or replaced sockets, then register new ones."""
        present = _registration_sockets(self._registry_dir)
        for path, registration in list(self._registrations.items()):
            if present.get(path) != registration.identity:
                await self._deregister(path, reason="registration socket removed or replaced")
        self._failures = {
            path: failure
            for path, failure in self._failures.items()
            if present.get(path) == failure.identity
        }
        now = time.monotonic()
        for path, identity in present.items():
            failure = self._failures.get(path)
            if path in self._registrations or (failure is not None and now < failure.retry_at):
                continue
            await self._register(path, identity)

    async def close(self) -> None:
        """Deregister every plugin and close its connection."""
        for path in list(self._registrations):
            await self._deregister(path, reason="watcher closed")
        self._failures.clear()

    async def _register(self, socket_path: str, identity: _SocketIdentity) -> None:
        try:
            client = await self._handshake(socket_path)
        except (
            RegistrationRejectedError,
            ConfigError,
            grpc.aio.AioRpcError,
            TimeoutError,
            OSError,
        ) as exc:
            log.warning(
                "plugin registration failed: %s",
                _describe(exc),
                extra={"registration_socket": socket_path},
            )
            retry_at = time.monotonic() + self._retry_interval
            self._failures[socket_path] = _Failure(identity=identity, retry_at=retry_at)
            return
        self._failures.pop(socket_path, None)
        self._registrations[socket_path] = _Registration(identity=identity, client=client)
        log.info(
            "plugin registered",
            extra={
                "driver": client.plugin.driver_name,
                "endpoint": client.plugin.endpoint,
                "service": client.plugin.service,
                "registration_socket": socket_path,
            },
        )

    async def _handshake(self, socket_path: str) -> DraPluginClient:
        """Register the plugin behind ``socket_path`` and tell it the verdict."""
        async with grpc.aio.insecure_channel(unix_address(socket_path)) as channel:
            registration = bindings.RegistrationStub(channel)
            reply = await registration.get_info(deadline=self._registration_timeout)
            info = convert.plugin_info_from_pb(reply)
            try:
                client = await self._connect(info, socket_path)
            except RegistrationRejectedError as exc:
                await self._notify(
                    registration, RegistrationStatus(registered=False, error=str(exc))
                )
                raise
            try:
                await self._notify(registration, RegistrationStatus(registered=True))
            except BaseException:
                await client.close()
                raise
            return client

    async def _connect(self, info: PluginInfo, socket_path: str) -> DraPluginClient:
        """Admit the plugin and connect to its endpoint; RegistrationRejectedError otherwise."""
        plugin = admit_plugin(
            info,
            registration_socket=socket_path,
            supported_services=self._supported_services,
            taken_endpoints=self._taken_endpoints(),
        )
        try:
            client = DraPluginClient(plugin, call_timeout=self._call_timeout)
        except ConfigError as exc:
            raise RegistrationRejectedError(str(exc)) from exc
        try:
            async with asyncio.timeout(self._registration_timeout):
                await client.wait_connected()
        except TimeoutError:
            await client.close()
            raise RegistrationRejectedError(
                f"DRA endpoint {plugin.endpoint} of driver {plugin.driver_name} does not answer"
            ) from None
        return client

    async def _notify(
        self, registration: bindings.RegistrationStub, status: RegistrationStatus
    ) -> None:
        await registration.notify_registration_status(
            convert.registration_status_to_pb(status), deadline=self._registration_timeout
        )

    async def _deregister(self, socket_path: str, *, reason: str) -> None:
        registration = self._registrations.pop(socket_path)
        plugin = registration.client.plugin
        # Calls already in flight get a moment to finish; the plugin may well be gone anyway.
        await registration.client.close(grace=0.5)
        log.info(
            "plugin deregistered: %s",
            reason,
            extra={"driver": plugin.driver_name, "registration_socket": socket_path},
        )

    def _taken_endpoints(self) -> set[tuple[str, str]]:
        return {
            (registration.client.plugin.driver_name, registration.client.plugin.endpoint)
            for registration in self._registrations.values()
        }


def _registration_sockets(directory: Path) -> Mapping[str, _SocketIdentity]:
    """The unix sockets directly in ``directory`` (hidden names skipped), by path."""
    sockets: dict[str, _SocketIdentity] = {}
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return sockets
    for entry in entries:
        if entry.name.startswith("."):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except FileNotFoundError:  # removed between listing and stat
            continue
        if stat.S_ISSOCK(info.st_mode):
            sockets[entry.path] = _SocketIdentity(info.st_ino, info.st_ctime_ns)
    return dict(sorted(sockets.items()))


def _describe(exc: BaseException) -> str:
    if isinstance(exc, grpc.aio.AioRpcError):
        return f"{exc.code().name}: {exc.details()}"
    return str(exc) or type(exc).__name__
