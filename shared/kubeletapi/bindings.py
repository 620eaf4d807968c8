"""gRPC bindings of the kubelet services: method paths and message codecs, both sides.

Bound by hand rather than through the generated ``*_pb2_grpc`` modules so that one set of DRA
message classes serves both DRA service versions (see ``convert``), exactly as the kubelet's
own Go types alias one version's messages in the other.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from shared.kubeletapi._generated.dra.v1 import api_pb2 as dra
from shared.kubeletapi._generated.pluginregistration.v1 import api_pb2 as registration
from shared.kubeletapi.versions import DRA_GRPC_SERVICES, REGISTRATION_GRPC_SERVICE

NODE_PREPARE_RESOURCES = "NodePrepareResources"
NODE_UNPREPARE_RESOURCES = "NodeUnprepareResources"
GET_INFO = "GetInfo"
NOTIFY_REGISTRATION_STATUS = "NotifyRegistrationStatus"

# grpc.aio passes a ServicerContext as the second argument; the plumbing never needs it.
PrepareMethod = Callable[
    [dra.NodePrepareResourcesRequest, Any], Awaitable[dra.NodePrepareResourcesResponse]
]
UnprepareMethod = Callable[
    [dra.NodeUnprepareResourcesRequest, Any], Awaitable[dra.NodeUnprepareResourcesResponse]
]
GetInfoMethod = Callable[[registration.InfoRequest, Any], Awaitable[registration.PluginInfo]]
NotifyMethod = Callable[
    [registration.RegistrationStatus, Any], Awaitable[registration.RegistrationStatusResponse]
]


def method_path(service: str, method: str) -> str:
    """The HTTP/2 path of a gRPC method: "/<fully qualified service>/<method>"."""
    return f"/{service}/{method}"


# --- server side -------------------------------------------------------------------------------


def dra_service_handler(
    dra_service: str, *, prepare: PrepareMethod, unprepare: UnprepareMethod
) -> grpc.GenericRpcHandler:
    """A grpc generic handler serving the DRA service version ``dra_service`` ("v1.DRAPlugin")."""
    return grpc.method_handlers_generic_handler(
        DRA_GRPC_SERVICES[dra_service],
        {
            NODE_PREPARE_RESOURCES: grpc.unary_unary_rpc_method_handler(
                prepare,
                request_deserializer=dra.NodePrepareResourcesRequest.FromString,
                response_serializer=dra.NodePrepareResourcesResponse.SerializeToString,
            ),
            NODE_UNPREPARE_RESOURCES: grpc.unary_unary_rpc_method_handler(
                unprepare,
                request_deserializer=dra.NodeUnprepareResourcesRequest.FromString,
                response_serializer=dra.NodeUnprepareResourcesResponse.SerializeToString,
            ),
        },
    )


def registration_service_handler(
    *, get_info: GetInfoMethod, notify: NotifyMethod
) -> grpc.GenericRpcHandler:
    """A grpc generic handler serving ``pluginregistration.Registration``."""
    return grpc.method_handlers_generic_handler(
        REGISTRATION_GRPC_SERVICE,
        {
            GET_INFO: grpc.unary_unary_rpc_method_handler(
                get_info,
                request_deserializer=registration.InfoRequest.FromString,
                response_serializer=registration.PluginInfo.SerializeToString,
            ),
            NOTIFY_REGISTRATION_STATUS: grpc.unary_unary_rpc_method_handler(
                notify,
                request_deserializer=registration.RegistrationStatus.FromString,
                response_serializer=registration.RegistrationStatusResponse.SerializeToString,
            ),
        },
    )


# --- client side -------------------------------------------------------------------------------


class DraStub:
    """Calls one DRA service version on a grpc.aio channel.

    ``deadline`` is the gRPC deadline in seconds; it travels with the call to the server.
    """

    def __init__(self, channel: grpc.aio.Channel, dra_service: str) -> None:
        service = DRA_GRPC_SERVICES[dra_service]
        self._prepare = channel.unary_unary(
            method_path(service, NODE_PREPARE_RESOURCES),
            request_serializer=dra.NodePrepareResourcesRequest.SerializeToString,
            response_deserializer=dra.NodePrepareResourcesResponse.FromString,
        )
        self._unprepare = channel.unary_unary(
            method_path(service, NODE_UNPREPARE_RESOURCES),
            request_serializer=dra.NodeUnprepareResourcesRequest.SerializeToString,
            response_deserializer=dra.NodeUnprepareResourcesResponse.FromString,
        )

    async def node_prepare_resources(
        self, request: dra.NodePrepareResourcesRequest, *, deadline: float
    ) -> dra.NodePrepareResourcesResponse:
        response: dra.NodePrepareResourcesResponse = await self._prepare(request, timeout=deadline)
        return response

    async def node_unprepare_resources(
        self, request: dra.NodeUnprepareResourcesRequest, *, deadline: float
    ) -> dra.NodeUnprepareResourcesResponse:
        response: dra.NodeUnprepareResourcesResponse = await self._unprepare(
            request, timeout=deadline
        )
        return response


class RegistrationStub:
    """Calls ``pluginregistration.Registration`` on a grpc.aio channel."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._get_info = channel.unary_unary(
            method_path(REGISTRATION_GRPC_SERVICE, GET_INFO),
            request_serializer=registration.InfoRequest.SerializeToString,
            response_deserializer=registration.PluginInfo.FromString,
        )
        self._notify = channel.unary_unary(
            method_path(REGISTRATION_GRPC_SERVICE, NOTIFY_REGISTRATION_STATUS),
            request_serializer=registration.RegistrationStatus.SerializeToString,
            response_deserializer=registration.RegistrationStatusResponse.FromString,
        )

    async def get_info(self, *, deadline: float) -> registration.PluginInfo:
        info: registration.PluginInfo = await self._get_info(
            registration.InfoRequest(), timeout=deadline
        )
        return info

    async def notify_registration_status(
        self, status: registration.RegistrationStatus, *, deadline: float
    ) -> None:
        await self._notify(status, timeout=deadline)
