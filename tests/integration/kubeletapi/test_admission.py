"""The kubelet side's rules for accepting a plugin that answered GetInfo."""

from __future__ import annotations

import pytest

from shared.kubeletapi import (
    DRA_V1,
    DRA_V1BETA1,
    PluginInfo,
    RegisteredPlugin,
    RegistrationRejectedError,
    admit_plugin,
)

SOCKET = "/var/lib/kubelet/plugins_registry/gpu.cdo.test-reg.sock"
ENDPOINT = "/var/lib/kubelet/plugins/gpu.cdo.test/dra.sock"


def info(**changes: object) -> PluginInfo:
    fields: dict[str, object] = {
        "plugin_type": "DRAPlugin",
        "name": "gpu.cdo.test",
        "endpoint": ENDPOINT,
        "supported_versions": (DRA_V1, DRA_V1BETA1),
    }
    fields.update(changes)
    return PluginInfo(**fields)  # type: ignore[arg-type]


def test_a_dra_plugin_is_admitted_with_its_preferred_service() -> None:
    assert admit_plugin(info(), registration_socket=SOCKET) == RegisteredPlugin(
        driver_name="gpu.cdo.test", endpoint=ENDPOINT, service=DRA_V1, registration_socket=SOCKET
    )


def test_the_plugins_order_decides_between_shared_services() -> None:
    plugin = admit_plugin(
        info(supported_versions=(DRA_V1BETA1, DRA_V1)), registration_socket=SOCKET
    )

    assert plugin.service == DRA_V1BETA1


def test_an_empty_endpoint_means_the_registration_socket() -> None:
    assert admit_plugin(info(endpoint=""), registration_socket=SOCKET).endpoint == SOCKET


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"plugin_type": "CSIPlugin"}, "plugin type 'CSIPlugin'"),
        ({"name": ""}, "driver name is empty"),
        ({"supported_versions": ()}, "no supported gRPC services"),
        ({"supported_versions": ("v1alpha4.Node",)}, "are supported by the kubelet"),
    ],
)
def test_unusable_plugins_are_rejected_with_a_reason(
    changes: dict[str, object], reason: str
) -> None:
    with pytest.raises(RegistrationRejectedError, match=reason):
        admit_plugin(info(**changes), registration_socket=SOCKET)


def test_an_endpoint_cannot_be_claimed_twice() -> None:
    with pytest.raises(RegistrationRejectedError, match="already registered"):
        admit_plugin(
            info(),
            registration_socket=SOCKET + ".second",
            taken_endpoints={("gpu.cdo.test", ENDPOINT)},
        )
