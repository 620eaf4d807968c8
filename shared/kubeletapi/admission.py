"""Kubelet side: the decision whether a plugin that answered GetInfo can be registered.

Pure, so the rules are testable without sockets. They follow the kubelet: only DRA plugins are
handled, a DRA plugin needs a name and a DRA service the kubelet speaks (the first one the
plugin lists wins), an empty endpoint means the registration socket serves DRA itself, and two
registration sockets cannot claim one driver's endpoint.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import msgspec

from shared.kubeletapi.errors import RegistrationRejectedError
from shared.kubeletapi.messages import PluginInfo
from shared.kubeletapi.versions import DRA_PLUGIN_TYPE, DRA_SERVICES, choose_dra_service


class RegisteredPlugin(msgspec.Struct, frozen=True, kw_only=True):
    """A DRA plugin the kubelet side accepted, and how to reach it."""

    driver_name: str
    endpoint: str
    # The DRA service version calls use, e.g. "v1.DRAPlugin".
    service: str
    registration_socket: str


def admit_plugin(
    info: PluginInfo,
    *,
    registration_socket: str,
    supported_services: Sequence[str] = DRA_SERVICES,
    taken_endpoints: Collection[tuple[str, str]] = (),
) -> RegisteredPlugin:
    """The registration for ``info``, or RegistrationRejectedError with the reason.

    ``taken_endpoints`` holds the (driver name, endpoint) pairs registered through other
    registration sockets.
    """
    if info.plugin_type != DRA_PLUGIN_TYPE:
        raise RegistrationRejectedError(
            f"no handler registered for plugin type {info.plugin_type!r} "
            f"at socket {registration_socket}"
        )
    if not info.name:
        raise RegistrationRejectedError("DRA driver name is empty")
    endpoint = info.endpoint or registration_socket
    if not info.supported_versions:
        raise RegistrationRejectedError(
            f"DRA driver {info.name} at endpoint {endpoint} lists no supported gRPC services"
        )
    service = choose_dra_service(info.supported_versions, supported_services)
    if service is None:
        raise RegistrationRejectedError(
            f"none of the services of DRA driver {info.name} at endpoint {endpoint} "
            f"({list(info.supported_versions)}) are supported by the kubelet "
            f"({list(supported_services)})"
        )
    if (info.name, endpoint) in taken_endpoints:
        raise RegistrationRejectedError(
            f"endpoint {endpoint} is already registered for DRA driver {info.name}"
        )
    return RegisteredPlugin(
        driver_name=info.name,
        endpoint=endpoint,
        service=service,
        registration_socket=registration_socket,
    )
