"""The kubelet's PodResources API v1 over a unix socket, both sides, in msgspec Structs.

Kubelet side (the simulated kubelet): ``PodResourcesServer(socket, source).start()`` serves
``v1.PodResourcesLister`` (List, GetAllocatableResources, Get) from a :class:`PodResourcesSource`.

Agent side (the health monitor): ``PodResourcesClient(socket)`` asks which pods hold which
devices; :meth:`PodResourcesClient.pods_holding` answers "which pods hold device ``id`` of
``resource``". The real kubelet's socket is :data:`KUBELET_SOCKET`. Protobuf stays inside this
module; the wire contract is ``proto/kubelet/podresources/v1/api.proto``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

import grpc
import msgspec

from shared.kubeletapi._generated.podresources.v1 import api_pb2 as pb
from shared.kubeletapi.errors import KubeletApiError
from shared.kubeletapi.sockets import UnixGrpcServer, unix_address

KUBELET_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
"""Where a kubelet serves the PodResources API."""
SERVICE = "v1.PodResourcesLister"
DEFAULT_CALL_TIMEOUT = 10.0


class PodResourcesError(KubeletApiError):
    """A PodResources call failed as a whole (``code``: the gRPC status code name)."""

    def __init__(self, *, method: str, code: str, details: str) -> None:
        super().__init__(f"PodResources {method} failed: {code}: {details}")
        self.method = method
        self.code = code


class Devices(msgspec.Struct, frozen=True, kw_only=True):
    """Devices of one extended resource, by their device plugin's IDs."""

    resource: str
    ids: tuple[str, ...]


class ClaimDevice(msgspec.Struct, frozen=True, kw_only=True):
    """One DRA device a container got through a claim."""

    claim_namespace: str
    claim_name: str
    driver: str
    pool: str
    device: str
    cdi_devices: tuple[str, ...] = ()


class ContainerResources(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    devices: tuple[Devices, ...] = ()
    dynamic: tuple[ClaimDevice, ...] = ()


class PodResources(msgspec.Struct, frozen=True, kw_only=True):
    namespace: str
    name: str
    containers: tuple[ContainerResources, ...] = ()

    def holds(self, resource: str, device_id: str) -> bool:
        return any(
            devices.resource == resource and device_id in devices.ids
            for container in self.containers
            for devices in container.devices
        )


class PodResourcesSource(Protocol):
    """What a kubelet knows: the pods it runs and the devices it can hand out."""

    def pod_resources(self) -> Sequence[PodResources]: ...

    def allocatable_devices(self) -> Sequence[Devices]: ...


# -- conversion ---------------------------------------------------------------------------------


def _devices_to_pb(devices: Devices) -> pb.ContainerDevices:
    return pb.ContainerDevices(resource_name=devices.resource, device_ids=list(devices.ids))


def _pod_to_pb(pod: PodResources) -> pb.PodResources:
    return pb.PodResources(
        name=pod.name,
        namespace=pod.namespace,
        containers=[
            pb.ContainerResources(
                name=container.name,
                devices=[_devices_to_pb(devices) for devices in container.devices],
                dynamic_resources=[
                    pb.DynamicResource(
                        claim_name=claim.claim_name,
                        claim_namespace=claim.claim_namespace,
                        claim_resources=[
                            pb.ClaimResource(
                                driver_name=claim.driver,
                                pool_name=claim.pool,
                                device_name=claim.device,
                                cdi_devices=[pb.CDIDevice(name=n) for n in claim.cdi_devices],
                            )
                        ],
                    )
                    for claim in container.dynamic
                ],
            )
            for container in pod.containers
        ],
    )


def _devices_from_pb(message: pb.ContainerDevices) -> Devices:
    return Devices(resource=message.resource_name, ids=tuple(message.device_ids))


def _dynamic_from_pb(message: pb.DynamicResource) -> Iterable[ClaimDevice]:
    for resource in message.claim_resources:
        yield ClaimDevice(
            claim_namespace=message.claim_namespace,
            claim_name=message.claim_name,
            driver=resource.driver_name,
            pool=resource.pool_name,
            device=resource.device_name,
            cdi_devices=tuple(cdi.name for cdi in resource.cdi_devices),
        )


def _pod_from_pb(message: pb.PodResources) -> PodResources:
    return PodResources(
        namespace=message.namespace,
        name=message.name,
        containers=tuple(
            ContainerResources(
                name=container.name,
                devices=tuple(_devices_from_pb(d) for d in container.devices),
                dynamic=tuple(
                    device
                    for dynamic in container.dynamic_resources
                    for device in _dynamic_from_pb(dynamic)
                ),
            )
            for container in message.containers
        ),
    )


# -- kubelet side -------------------------------------------------------------------------------


class PodResourcesServer(UnixGrpcServer):
    """Serves ``v1.PodResourcesLister`` from ``source`` on the unix socket ``socket``."""

    def __init__(self, socket: Path, source: PodResourcesSource) -> None:
        self._source = source
        super().__init__(socket, self._handler())

    def _handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(
            SERVICE,
            {
                "List": grpc.unary_unary_rpc_method_handler(
                    self._list,
                    request_deserializer=pb.ListPodResourcesRequest.FromString,
                    response_serializer=pb.ListPodResourcesResponse.SerializeToString,
                ),
                "GetAllocatableResources": grpc.unary_unary_rpc_method_handler(
                    self._allocatable,
                    request_deserializer=pb.AllocatableResourcesRequest.FromString,
                    response_serializer=pb.AllocatableResourcesResponse.SerializeToString,
                ),
                "Get": grpc.unary_unary_rpc_method_handler(
                    self._get,
                    request_deserializer=pb.GetPodResourcesRequest.FromString,
                    response_serializer=pb.GetPodResourcesResponse.SerializeToString,
                ),
            },
        )

    async def _list(self, _request: pb.ListPodResourcesRequest, _context: Any) -> Any:
        pods = self._source.pod_resources()
        return pb.ListPodResourcesResponse(pod_resources=[_pod_to_pb(pod) for pod in pods])

    async def _allocatable(self, _request: pb.AllocatableResourcesRequest, _context: Any) -> Any:
        devices = self._source.allocatable_devices()
        return pb.AllocatableResourcesResponse(devices=[_devices_to_pb(d) for d in devices])

    async def _get(self, request: pb.GetPodResourcesRequest, context: Any) -> Any:
        for pod in self._source.pod_resources():
            if (pod.namespace, pod.name) == (request.pod_namespace, request.pod_name):
                return pb.GetPodResourcesResponse(pod_resources=_pod_to_pb(pod))
        # The kubelet answers a pod it does not run with an error naming it.
        await context.abort(
            grpc.StatusCode.NOT_FOUND,
            f"pod {request.pod_name} not found in {request.pod_namespace}",
        )
        return None


# -- agent side ---------------------------------------------------------------------------------


class PodResourcesClient:
    """A connection to a kubelet's PodResources socket; every call is one gRPC request."""

    def __init__(
        self, socket: str | Path = KUBELET_SOCKET, *, call_timeout: float = DEFAULT_CALL_TIMEOUT
    ) -> None:
        self.socket = str(socket)
        self._call_timeout = call_timeout
        self._channel = grpc.aio.insecure_channel(unix_address(socket))

    async def list_pods(self) -> tuple[PodResources, ...]:
        response = await self._call(
            "List", pb.ListPodResourcesRequest(), pb.ListPodResourcesResponse
        )
        return tuple(_pod_from_pb(pod) for pod in response.pod_resources)

    async def get(self, namespace: str, name: str) -> PodResources:
        request = pb.GetPodResourcesRequest(pod_name=name, pod_namespace=namespace)
        response = await self._call("Get", request, pb.GetPodResourcesResponse)
        return _pod_from_pb(response.pod_resources)

    async def allocatable(self) -> tuple[Devices, ...]:
        response = await self._call(
            "GetAllocatableResources",
            pb.AllocatableResourcesRequest(),
            pb.AllocatableResourcesResponse,
        )
        return tuple(_devices_from_pb(devices) for devices in response.devices)

    async def pods_holding(self, resource: str, device_ids: Iterable[str]) -> list[PodResources]:
        """The pods one of whose containers holds any of ``device_ids`` of ``resource``."""
        wanted = set(device_ids)
        return [
            pod
            for pod in await self.list_pods()
            if any(pod.holds(resource, device_id) for device_id in wanted)
        ]

    async def close(self) -> None:
        await self._channel.close()

    async def _call(self, method: str, request: Any, response_type: Any) -> Any:
        call = self._channel.unary_unary(
            f"/{SERVICE}/{method}",
            request_serializer=type(request).SerializeToString,
            response_deserializer=response_type.FromString,
        )
        try:
            return await call(request, timeout=self._call_timeout)
        except grpc.aio.AioRpcError as exc:
            raise PodResourcesError(
                method=method, code=exc.code().name, details=exc.details() or ""
            ) from exc
