"""Both sides of the device plugin API over unix sockets, in the Structs of ``deviceplugin``.

Plugin side (a device plugin such as NVIDIA's)::

    server = DevicePluginServer(socket, handler)      # handler: a DevicePluginHandler
    await server.start()
    await register(kubelet_socket, Registration(version=VERSION, endpoint=socket.name,
                                                resource_name="nvidia.com/gpu"))

Kubelet side (the simulated kubelet's device manager)::

    registrations = RegistrationServer(kubelet_socket, on_register)   # async on_register(reg)
    await registrations.start()
    plugin = DevicePluginClient(directory / reg.endpoint)
    async for devices in plugin.list_and_watch(): ...
    await plugin.allocate([("GPU-…",)])

``on_register`` raising :class:`RegistrationRefusedError` refuses the plugin with that message.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import grpc

from shared.kubeletapi import deviceplugin as dp
from shared.kubeletapi._generated.deviceplugin.v1beta1 import api_pb2 as pb
from shared.kubeletapi.errors import KubeletApiError
from shared.kubeletapi.sockets import UnixGrpcServer, unix_address

log = logging.getLogger(__name__)

DEFAULT_CALL_TIMEOUT = 10.0


class RegistrationRefusedError(KubeletApiError):
    """The kubelet refuses a plugin's registration; the message is what the plugin is told."""


class DevicePluginHandler(Protocol):
    """What a device plugin answers."""

    def options(self) -> dp.PluginOptions: ...

    def list_and_watch(self) -> AsyncIterator[Sequence[dp.Device]]:
        """The device list now, then again after every change, until the stream ends."""
        ...

    async def preferred_allocation(
        self, requests: Sequence[dp.PreferredRequest]
    ) -> list[tuple[str, ...]]: ...

    async def allocate(self, requests: Sequence[tuple[str, ...]]) -> list[dp.ContainerAllocation]:
        """One answer per container request (each a tuple of device IDs); raise to refuse."""
        ...


# -- plugin side --------------------------------------------------------------------------------


class DevicePluginServer(UnixGrpcServer):
    """Serves ``v1beta1.DevicePlugin`` from ``handler`` on ``socket``."""

    def __init__(self, socket: Path, handler: DevicePluginHandler) -> None:
        self._plugin = handler
        unary = grpc.unary_unary_rpc_method_handler
        super().__init__(
            socket,
            grpc.method_handlers_generic_handler(
                dp.DEVICE_PLUGIN_SERVICE,
                {
                    "GetDevicePluginOptions": unary(
                        self._options,
                        request_deserializer=pb.Empty.FromString,
                        response_serializer=pb.DevicePluginOptions.SerializeToString,
                    ),
                    "ListAndWatch": grpc.unary_stream_rpc_method_handler(
                        self._list_and_watch,
                        request_deserializer=pb.Empty.FromString,
                        response_serializer=pb.ListAndWatchResponse.SerializeToString,
                    ),
                    "GetPreferredAllocation": unary(
                        self._preferred,
                        request_deserializer=pb.PreferredAllocationRequest.FromString,
                        response_serializer=pb.PreferredAllocationResponse.SerializeToString,
                    ),
                    "Allocate": unary(
                        self._allocate,
                        request_deserializer=pb.AllocateRequest.FromString,
                        response_serializer=pb.AllocateResponse.SerializeToString,
                    ),
                    "PreStartContainer": unary(
                        self._pre_start,
                        request_deserializer=pb.PreStartContainerRequest.FromString,
                        response_serializer=pb.PreStartContainerResponse.SerializeToString,
                    ),
                },
            ),
        )

    async def _options(self, _request: pb.Empty, _context: Any) -> Any:
        return dp.options_to_pb(self._plugin.options())

    async def _list_and_watch(self, _request: pb.Empty, _context: Any) -> AsyncIterator[Any]:
        async for devices in self._plugin.list_and_watch():
            yield dp.devices_to_pb(devices)

    async def _preferred(self, request: pb.PreferredAllocationRequest, context: Any) -> Any:
        try:
            chosen = await self._plugin.preferred_allocation(dp.preferred_from_pb(request))
        except ValueError as exc:
            await context.abort(grpc.StatusCode.UNKNOWN, str(exc))
        return pb.PreferredAllocationResponse(
            container_responses=[
                pb.ContainerPreferredAllocationResponse(deviceIDs=list(ids)) for ids in chosen
            ]
        )

    async def _allocate(self, request: pb.AllocateRequest, context: Any) -> Any:
        ids = [tuple(container.devices_ids) for container in request.container_requests]
        try:
            answers = await self._plugin.allocate(ids)
        except ValueError as exc:
            # A Go plugin returning an error answers with code Unknown and its message.
            await context.abort(grpc.StatusCode.UNKNOWN, str(exc))
        return pb.AllocateResponse(container_responses=[dp.allocation_to_pb(a) for a in answers])

    async def _pre_start(self, _request: pb.PreStartContainerRequest, _context: Any) -> Any:
        return pb.PreStartContainerResponse()


async def register(
    kubelet_socket: Path, registration: dp.Registration, *, call_timeout: float = 5.0
) -> None:
    """Register with the kubelet on ``kubelet_socket`` (DevicePluginError when refused)."""
    async with grpc.aio.insecure_channel(unix_address(kubelet_socket)) as channel:
        call = channel.unary_unary(
            f"/{dp.REGISTRATION_SERVICE}/Register",
            request_serializer=pb.RegisterRequest.SerializeToString,
            response_deserializer=pb.Empty.FromString,
        )
        try:
            await call(dp.registration_to_pb(registration), timeout=call_timeout)
        except grpc.aio.AioRpcError as exc:
            raise dp.DevicePluginError(
                method="Register", code=exc.code().name, details=exc.details() or ""
            ) from exc


# -- kubelet side -------------------------------------------------------------------------------


class RegistrationServer(UnixGrpcServer):
    """Serves ``v1beta1.Registration`` on ``socket``; each request goes to ``on_register``."""

    def __init__(
        self, socket: Path, on_register: Callable[[dp.Registration], Awaitable[None]]
    ) -> None:
        self._on_register = on_register
        super().__init__(
            socket,
            grpc.method_handlers_generic_handler(
                dp.REGISTRATION_SERVICE,
                {
                    "Register": grpc.unary_unary_rpc_method_handler(
                        self._register,
                        request_deserializer=pb.RegisterRequest.FromString,
                        response_serializer=pb.Empty.SerializeToString,
                    )
                },
            ),
        )

    async def _register(self, request: pb.RegisterRequest, context: Any) -> Any:
        try:
            await self._on_register(dp.registration_from_pb(request))
        except RegistrationRefusedError as exc:
            await context.abort(grpc.StatusCode.UNKNOWN, str(exc))
        return pb.Empty()


class DevicePluginClient:
    """A connection to one device plugin's socket."""

    def __init__(self, socket: Path, *, call_timeout: float = DEFAULT_CALL_TIMEOUT) -> None:
        self.socket = socket
        self._call_timeout = call_timeout
        self._channel = grpc.aio.insecure_channel(unix_address(socket))

    async def options(self) -> dp.PluginOptions:
        answer = await self._unary(
            "GetDevicePluginOptions", pb.Empty(), pb.DevicePluginOptions.FromString
        )
        return dp.options_from_pb(answer)

    async def list_and_watch(self) -> AsyncIterator[tuple[dp.Device, ...]]:
        """Every device list the plugin sends; ends (DevicePluginError) when the stream breaks."""
        call = self._channel.unary_stream(
            f"/{dp.DEVICE_PLUGIN_SERVICE}/ListAndWatch",
            request_serializer=pb.Empty.SerializeToString,
            response_deserializer=pb.ListAndWatchResponse.FromString,
        )
        stream = call(pb.Empty())
        try:
            async for message in stream:
                yield dp.devices_from_pb(message)
        except grpc.aio.AioRpcError as exc:
            raise dp.DevicePluginError(
                method="ListAndWatch", code=exc.code().name, details=exc.details() or ""
            ) from exc
        finally:
            stream.cancel()

    async def preferred_allocation(
        self, requests: Sequence[dp.PreferredRequest]
    ) -> list[tuple[str, ...]]:
        answer = await self._unary(
            "GetPreferredAllocation",
            dp.preferred_to_pb(requests),
            pb.PreferredAllocationResponse.FromString,
        )
        return [tuple(container.deviceIDs) for container in answer.container_responses]

    async def allocate(self, requests: Sequence[tuple[str, ...]]) -> list[dp.ContainerAllocation]:
        containers = [pb.ContainerAllocateRequest(devices_ids=list(ids)) for ids in requests]
        request = pb.AllocateRequest(container_requests=containers)
        answer = await self._unary("Allocate", request, pb.AllocateResponse.FromString)
        return [dp.allocation_from_pb(container) for container in answer.container_responses]

    async def close(self) -> None:
        await self._channel.close()

    async def _unary(self, method: str, request: Any, decode: Callable[[bytes], Any]) -> Any:
        call = self._channel.unary_unary(
            f"/{dp.DEVICE_PLUGIN_SERVICE}/{method}",
            request_serializer=type(request).SerializeToString,
            response_deserializer=decode,
        )
        try:
            return await call(request, timeout=self._call_timeout)
        except grpc.aio.AioRpcError as exc:
            raise dp.DevicePluginError(
                method=method, code=exc.code().name, details=exc.details() or ""
            ) from exc
