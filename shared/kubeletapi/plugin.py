"""Plugin side: a DRA kubelet plugin serving its two unix sockets.

    plugin = KubeletPlugin(driver_name="compute-domain.cdo.dev", handler=handler,
                           paths=PluginPaths.for_driver("compute-domain.cdo.dev"))
    async with plugin:                      # or: task_group.create_task(plugin.run())
        readiness.add("kubelet-registration", lambda: plugin.registered)
        ...

The DRA socket (``paths.plugin_socket``) serves the DRA service in every version the plugin
offers; the registration socket (``paths.registration_socket``), inside the kubelet's
plugins_registry directory, is how the kubelet finds the plugin. The DRA server starts first so
that the endpoint answers as soon as the kubelet sees the registration socket, and the
registration socket goes first on stop so that the kubelet stops sending work before the
endpoint closes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import grpc
import msgspec

from shared.kubeletapi import bindings
from shared.kubeletapi.dra_service import DraHandler, DraServicer
from shared.kubeletapi.messages import PluginInfo, RegistrationStatus
from shared.kubeletapi.registration_service import RegistrationServicer
from shared.kubeletapi.sockets import clear_socket_path, unix_address
from shared.kubeletapi.versions import DRA_PLUGIN_TYPE, DRA_SERVICES, check_dra_services

log = logging.getLogger(__name__)

DEFAULT_KUBELET_ROOT = Path("/var/lib/kubelet")


class PluginPaths(msgspec.Struct, frozen=True, kw_only=True):
    """Where a DRA plugin puts its two sockets."""

    plugin_socket: Path
    registration_socket: Path

    @classmethod
    def for_driver(
        cls, driver_name: str, *, kubelet_root: Path = DEFAULT_KUBELET_ROOT
    ) -> PluginPaths:
        """The kubelet's conventional layout below ``kubelet_root`` (one root per node)."""
        return cls(
            plugin_socket=kubelet_root / "plugins" / driver_name / "dra.sock",
            registration_socket=kubelet_root / "plugins_registry" / f"{driver_name}-reg.sock",
        )


class KubeletPlugin:
    """Serves a DraHandler to the kubelet and registers it.

    ``dra_services`` are the DRA versions served and advertised, newest first; both by default
    so that kubelets that only know v1beta1 can use the plugin too.
    """

    def __init__(
        self,
        *,
        driver_name: str,
        handler: DraHandler,
        paths: PluginPaths,
        dra_services: Sequence[str] = DRA_SERVICES,
        stop_grace: float = 1.0,
    ) -> None:
        if not driver_name:
            raise ValueError("driver_name must not be empty")
        self._paths = paths
        self._dra_services = check_dra_services(dra_services)
        self._stop_grace = stop_grace
        self._dra = DraServicer(handler, driver_name=driver_name)
        self._registration = RegistrationServicer(
            PluginInfo(
                plugin_type=DRA_PLUGIN_TYPE,
                name=driver_name,
                endpoint=str(paths.plugin_socket.absolute()),
                supported_versions=self._dra_services,
            )
        )
        self._dra_server: grpc.aio.Server | None = None
        self._registration_server: grpc.aio.Server | None = None

    @property
    def info(self) -> PluginInfo:
        """What the plugin tells the kubelet about itself."""
        return self._registration.info

    @property
    def registration_status(self) -> RegistrationStatus | None:
        """The kubelet's latest verdict on this plugin; None until it has given one."""
        return self._registration.status

    @property
    def registered(self) -> bool:
        """True while the kubelet's latest verdict is "registered" (for readiness checks)."""
        status = self._registration.status
        return status is not None and status.registered

    async def start(self) -> None:
        if self._dra_server is not None:
            raise RuntimeError("plugin already started")
        # The address check runs before anything binds so that a bad path leaves nothing behind.
        dra_address = unix_address(self._paths.plugin_socket)
        registration_address = unix_address(self._paths.registration_socket)
        dra_handlers = [
            bindings.dra_service_handler(
                service,
                prepare=self._dra.node_prepare_resources,
                unprepare=self._dra.node_unprepare_resources,
            )
            for service in self._dra_services
        ]
        registration_handler = bindings.registration_service_handler(
            get_info=self._registration.get_info,
            notify=self._registration.notify_registration_status,
        )
        self._dra_server = await _serve(self._paths.plugin_socket, dra_address, dra_handlers)
        try:
            self._registration_server = await _serve(
                self._paths.registration_socket, registration_address, [registration_handler]
            )
        except BaseException:
            await self._stop_dra_server()
            raise
        log.info(
            "kubelet plugin serving",
            extra={
                "driver": self.info.name,
                "endpoint": self.info.endpoint,
                "registration_socket": str(self._paths.registration_socket),
                "services": list(self._dra_services),
            },
        )

    async def stop(self) -> None:
        """Withdraw the registration, then close the DRA endpoint. Safe to call twice."""
        if self._registration_server is not None:
            server, self._registration_server = self._registration_server, None
            await server.stop(self._stop_grace)
            self._paths.registration_socket.unlink(missing_ok=True)
        await self._stop_dra_server()
        self._registration.status = None

    async def run(self) -> None:
        """Serve until cancelled, then stop; for a supervisor or a task group."""
        await self.start()
        try:
            await asyncio.Event().wait()
        finally:
            await self.stop()

    async def __aenter__(self) -> KubeletPlugin:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()

    async def _stop_dra_server(self) -> None:
        if self._dra_server is not None:
            server, self._dra_server = self._dra_server, None
            await server.stop(self._stop_grace)
            self._paths.plugin_socket.unlink(missing_ok=True)


async def _serve(
    socket_path: Path, address: str, handlers: Sequence[grpc.GenericRpcHandler]
) -> grpc.aio.Server:
    clear_socket_path(socket_path)
    server = grpc.aio.server(handlers=list(handlers))
    if server.add_insecure_port(address) == 0:
        raise OSError(f"cannot listen on {address}")
    await server.start()
    return server
