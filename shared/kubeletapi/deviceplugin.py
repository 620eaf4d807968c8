"""The kubelet's device plugin API v1beta1: its constants, messages and protobuf conversion.

A device plugin (NVIDIA's, for ``nvidia.com/gpu``) serves ``v1beta1.DevicePlugin`` on a socket
in the kubelet's device-plugins directory and registers it with the kubelet's
``v1beta1.Registration`` on ``kubelet.sock`` in the same directory. The kubelet then reads the
device list and each device's health from ``ListAndWatch`` and calls ``Allocate`` (and
``GetPreferredAllocation`` when the plugin offers it) when it gives devices to a container.
The calls on both sides are in :mod:`shared.kubeletapi.deviceplugin_rpc`; the wire contract is
``proto/kubelet/deviceplugin/v1beta1/api.proto``. Protobuf stays inside these two modules.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from shared.kubeletapi._generated.deviceplugin.v1beta1 import api_pb2 as pb
from shared.kubeletapi.errors import KubeletApiError

VERSION = "v1beta1"
"""The API version a plugin registers with (the only one kubelets support)."""
HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"
DEVICE_PLUGIN_DIR = "device-plugins"
"""Below the kubelet's root (/var/lib/kubelet/device-plugins on a real node)."""
KUBELET_SOCKET_NAME = "kubelet.sock"
"""The kubelet's Registration socket in that directory."""
REGISTRATION_SERVICE = "v1beta1.Registration"
DEVICE_PLUGIN_SERVICE = "v1beta1.DevicePlugin"


class DevicePluginError(KubeletApiError):
    """A device plugin API call failed as a whole (``code``: the gRPC status code name)."""

    def __init__(self, *, method: str, code: str, details: str) -> None:
        super().__init__(f"device plugin {method} failed: {code}: {details}")
        self.method = method
        self.code = code
        self.details = details


class Device(msgspec.Struct, frozen=True, kw_only=True):
    """One device as its plugin lists it."""

    id: str
    health: str = HEALTHY


class PluginOptions(msgspec.Struct, frozen=True, kw_only=True):
    pre_start_required: bool = False
    get_preferred_allocation_available: bool = False


class Registration(msgspec.Struct, frozen=True, kw_only=True):
    """A plugin's RegisterRequest: its endpoint is a socket name in the device-plugins dir."""

    version: str
    endpoint: str
    resource_name: str
    options: PluginOptions = PluginOptions()


class PreferredRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One container's GetPreferredAllocation request."""

    available: tuple[str, ...]
    must_include: tuple[str, ...] = ()
    size: int


class Mount(msgspec.Struct, frozen=True, kw_only=True):
    container_path: str
    host_path: str
    read_only: bool = False


class DeviceSpec(msgspec.Struct, frozen=True, kw_only=True):
    container_path: str
    host_path: str
    permissions: str = ""


class ContainerAllocation(msgspec.Struct, frozen=True, kw_only=True):
    """What one container needs to reach its devices (a ContainerAllocateResponse)."""

    envs: dict[str, str] = msgspec.field(default_factory=dict)
    mounts: tuple[Mount, ...] = ()
    devices: tuple[DeviceSpec, ...] = ()
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    cdi_devices: tuple[str, ...] = ()


# -- conversion ---------------------------------------------------------------------------------


def options_to_pb(options: PluginOptions) -> pb.DevicePluginOptions:
    return pb.DevicePluginOptions(
        pre_start_required=options.pre_start_required,
        get_preferred_allocation_available=options.get_preferred_allocation_available,
    )


def options_from_pb(message: pb.DevicePluginOptions) -> PluginOptions:
    return PluginOptions(
        pre_start_required=message.pre_start_required,
        get_preferred_allocation_available=message.get_preferred_allocation_available,
    )


def registration_to_pb(registration: Registration) -> pb.RegisterRequest:
    return pb.RegisterRequest(
        version=registration.version,
        endpoint=registration.endpoint,
        resource_name=registration.resource_name,
        options=options_to_pb(registration.options),
    )


def registration_from_pb(message: pb.RegisterRequest) -> Registration:
    return Registration(
        version=message.version,
        endpoint=message.endpoint,
        resource_name=message.resource_name,
        options=options_from_pb(message.options),
    )


def devices_to_pb(devices: Sequence[Device]) -> pb.ListAndWatchResponse:
    return pb.ListAndWatchResponse(
        devices=[pb.Device(ID=device.id, health=device.health) for device in devices]
    )


def devices_from_pb(message: pb.ListAndWatchResponse) -> tuple[Device, ...]:
    return tuple(Device(id=device.ID, health=device.health) for device in message.devices)


def preferred_to_pb(requests: Sequence[PreferredRequest]) -> pb.PreferredAllocationRequest:
    return pb.PreferredAllocationRequest(
        container_requests=[
            pb.ContainerPreferredAllocationRequest(
                available_deviceIDs=list(request.available),
                must_include_deviceIDs=list(request.must_include),
                allocation_size=request.size,
            )
            for request in requests
        ]
    )


def preferred_from_pb(message: pb.PreferredAllocationRequest) -> tuple[PreferredRequest, ...]:
    return tuple(
        PreferredRequest(
            available=tuple(request.available_deviceIDs),
            must_include=tuple(request.must_include_deviceIDs),
            size=request.allocation_size,
        )
        for request in message.container_requests
    )


def allocation_to_pb(allocation: ContainerAllocation) -> pb.ContainerAllocateResponse:
    return pb.ContainerAllocateResponse(
        envs=allocation.envs,
        mounts=[
            pb.Mount(container_path=m.container_path, host_path=m.host_path, read_only=m.read_only)
            for m in allocation.mounts
        ],
        devices=[
            pb.DeviceSpec(
                container_path=d.container_path, host_path=d.host_path, permissions=d.permissions
            )
            for d in allocation.devices
        ],
        annotations=allocation.annotations,
        cdi_devices=[pb.CDIDevice(name=name) for name in allocation.cdi_devices],
    )


def allocation_from_pb(message: pb.ContainerAllocateResponse) -> ContainerAllocation:
    return ContainerAllocation(
        envs=dict(message.envs),
        mounts=tuple(
            Mount(container_path=m.container_path, host_path=m.host_path, read_only=m.read_only)
            for m in message.mounts
        ),
        devices=tuple(
            DeviceSpec(
                container_path=d.container_path, host_path=d.host_path, permissions=d.permissions
            )
            for d in message.devices
        ),
        annotations=dict(message.annotations),
        cdi_devices=tuple(cdi.name for cdi in message.cdi_devices),
    )
