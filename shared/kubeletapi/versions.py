"""Identifiers of the kubelet contracts: plugin type, DRA service versions, their gRPC names.

A DRA plugin lists the DRA services it serves in ``PluginInfo.supported_versions`` as
"<version>.DRAPlugin". The kubelet uses the first entry of that list it knows, so a plugin
lists the newest first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from shared.kubeletapi._generated.dra.v1 import api_pb2 as dra_v1
from shared.kubeletapi._generated.dra.v1beta1 import api_pb2 as dra_v1beta1
from shared.kubeletapi._generated.pluginregistration.v1 import api_pb2 as registration_v1

# PluginInfo.type of a DRA driver's kubelet plugin.
DRA_PLUGIN_TYPE = "DRAPlugin"

DRA_V1 = "v1.DRAPlugin"
DRA_V1BETA1 = "v1beta1.DRAPlugin"
# Newest first: the order a plugin advertises and a kubelet prefers.
DRA_SERVICES: tuple[str, ...] = (DRA_V1, DRA_V1BETA1)

# Fully qualified gRPC service names; they are part of every method path on the wire.
DRA_GRPC_SERVICES: Mapping[str, str] = {
    DRA_V1: dra_v1.DESCRIPTOR.services_by_name["DRAPlugin"].full_name,
    DRA_V1BETA1: dra_v1beta1.DESCRIPTOR.services_by_name["DRAPlugin"].full_name,
}
REGISTRATION_GRPC_SERVICE: str = registration_v1.DESCRIPTOR.services_by_name[
    "Registration"
].full_name


def choose_dra_service(
    advertised: Sequence[str], supported: Sequence[str] = DRA_SERVICES
) -> str | None:
    """The service a kubelet supporting ``supported`` uses for a plugin advertising ``advertised``.

    Like the kubelet, the plugin's order decides: the first advertised service that is supported.
    """
    return next((service for service in advertised if service in supported), None)


def check_dra_services(services: Sequence[str]) -> tuple[str, ...]:
    """``services`` as a tuple, or ValueError naming the entries this package cannot serve."""
    unknown = [service for service in services if service not in DRA_GRPC_SERVICES]
    if unknown or not services:
        raise ValueError(
            f"DRA services must be a non-empty subset of {list(DRA_SERVICES)}, got {list(services)}"
        )
    return tuple(services)
