"""Conversion between the Structs in ``messages`` and the protobuf messages on the wire.

The only module besides ``bindings`` that touches generated protobuf classes. DRA v1beta1 is
encoded with the v1 classes: the two versions declare the same messages field for field (a test
holds them to that), so their bytes are identical and only the service name differs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from shared.kubeletapi._generated.dra.v1 import api_pb2 as dra
from shared.kubeletapi._generated.pluginregistration.v1 import api_pb2 as registration
from shared.kubeletapi.messages import (
    Claim,
    PluginInfo,
    PreparedDevice,
    PrepareResult,
    RegistrationStatus,
    UnprepareResult,
)

# --- DRA: claims -------------------------------------------------------------------------------


def claim_to_pb(claim: Claim) -> dra.Claim:
    return dra.Claim(namespace=claim.namespace, uid=claim.uid, name=claim.name)


def claim_from_pb(message: dra.Claim) -> Claim:
    return Claim(namespace=message.namespace, uid=message.uid, name=message.name)


def prepare_request(claims: Iterable[Claim]) -> dra.NodePrepareResourcesRequest:
    return dra.NodePrepareResourcesRequest(claims=[claim_to_pb(claim) for claim in claims])


def unprepare_request(claims: Iterable[Claim]) -> dra.NodeUnprepareResourcesRequest:
    return dra.NodeUnprepareResourcesRequest(claims=[claim_to_pb(claim) for claim in claims])


def claims_from_request(
    request: dra.NodePrepareResourcesRequest | dra.NodeUnprepareResourcesRequest,
) -> tuple[Claim, ...]:
    return tuple(claim_from_pb(message) for message in request.claims)


# --- DRA: results ------------------------------------------------------------------------------


def device_to_pb(device: PreparedDevice) -> dra.Device:
    return dra.Device(
        request_names=device.request_names,
        pool_name=device.pool_name,
        device_name=device.device_name,
        cdi_device_ids=device.cdi_device_ids,
    )


def device_from_pb(message: dra.Device) -> PreparedDevice:
    return PreparedDevice(
        pool_name=message.pool_name,
        device_name=message.device_name,
        cdi_device_ids=tuple(message.cdi_device_ids),
        request_names=tuple(message.request_names),
    )


def prepare_response(results: Mapping[str, PrepareResult]) -> dra.NodePrepareResourcesResponse:
    return dra.NodePrepareResourcesResponse(
        claims={
            uid: dra.NodePrepareResourceResponse(
                devices=[device_to_pb(device) for device in result.devices], error=result.error
            )
            for uid, result in results.items()
        }
    )


def prepare_results_from_response(
    response: dra.NodePrepareResourcesResponse,
) -> dict[str, PrepareResult]:
    return {
        uid: PrepareResult(
            devices=tuple(device_from_pb(device) for device in entry.devices), error=entry.error
        )
        for uid, entry in response.claims.items()
    }


def unprepare_response(
    results: Mapping[str, UnprepareResult],
) -> dra.NodeUnprepareResourcesResponse:
    return dra.NodeUnprepareResourcesResponse(
        claims={
            uid: dra.NodeUnprepareResourceResponse(error=result.error)
            for uid, result in results.items()
        }
    )


def unprepare_results_from_response(
    response: dra.NodeUnprepareResourcesResponse,
) -> dict[str, UnprepareResult]:
    return {uid: UnprepareResult(error=entry.error) for uid, entry in response.claims.items()}


# --- plugin registration -----------------------------------------------------------------------


def plugin_info_to_pb(info: PluginInfo) -> registration.PluginInfo:
    return registration.PluginInfo(
        type=info.plugin_type,
        name=info.name,
        endpoint=info.endpoint,
        supported_versions=info.supported_versions,
    )


def plugin_info_from_pb(message: registration.PluginInfo) -> PluginInfo:
    return PluginInfo(
        plugin_type=message.type,
        name=message.name,
        endpoint=message.endpoint,
        supported_versions=tuple(message.supported_versions),
    )


def registration_status_to_pb(status: RegistrationStatus) -> registration.RegistrationStatus:
    return registration.RegistrationStatus(plugin_registered=status.registered, error=status.error)


def registration_status_from_pb(message: registration.RegistrationStatus) -> RegistrationStatus:
    return RegistrationStatus(registered=message.plugin_registered, error=message.error)
