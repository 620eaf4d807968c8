"""The generated bindings are current and the wire names are the kubelet's."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from shared.kubeletapi import PreparedDevice, PrepareResult, convert, generate
from shared.kubeletapi._generated.dra.v1 import api_pb2 as dra_v1
from shared.kubeletapi._generated.dra.v1beta1 import api_pb2 as dra_v1beta1
from shared.kubeletapi._generated.pluginregistration.v1 import api_pb2 as registration_v1
from shared.kubeletapi.bindings import method_path
from shared.kubeletapi.versions import DRA_GRPC_SERVICES, REGISTRATION_GRPC_SERVICE

# Field numbers of the kubelet's definitions; a change here breaks every real kubelet.
KUBELET_FIELDS = {
    registration_v1.DESCRIPTOR: {
        "PluginInfo": {"type": 1, "name": 2, "endpoint": 3, "supported_versions": 4},
        "RegistrationStatus": {"plugin_registered": 1, "error": 2},
        "RegistrationStatusResponse": {},
        "InfoRequest": {},
    },
    dra_v1.DESCRIPTOR: {
        "NodePrepareResourcesRequest": {"claims": 1},
        "NodePrepareResourcesResponse": {"claims": 1},
        "NodePrepareResourceResponse": {"devices": 1, "error": 2},
        "Device": {"request_names": 1, "pool_name": 2, "device_name": 3, "cdi_device_ids": 4},
        "NodeUnprepareResourcesRequest": {"claims": 1},
        "NodeUnprepareResourcesResponse": {"claims": 1},
        "NodeUnprepareResourceResponse": {"error": 1},
        "Claim": {"namespace": 1, "uid": 2, "name": 3},
    },
}


def test_committed_bindings_match_the_generator() -> None:
    stale = generate.stale_files(generate.render(), generate.read_tree())

    assert stale == [], "run `python -m shared.kubeletapi.generate` and commit the result"


def test_method_paths_are_the_kubelets() -> None:
    paths = {
        method_path(service.full_name, method.name)
        for module in (registration_v1, dra_v1, dra_v1beta1)
        for service in module.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    }

    assert paths == {
        "/pluginregistration.Registration/GetInfo",
        "/pluginregistration.Registration/NotifyRegistrationStatus",
        "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources",
        "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources",
        "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodePrepareResources",
        "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodeUnprepareResources",
    }
    assert REGISTRATION_GRPC_SERVICE == "pluginregistration.Registration"
    assert DRA_GRPC_SERVICES == {
        "v1.DRAPlugin": "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin",
        "v1beta1.DRAPlugin": "k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin",
    }


def test_field_numbers_are_the_kubelets() -> None:
    for file, messages in KUBELET_FIELDS.items():
        actual = {
            name: {field.name: field.number for field in message.fields}
            for name, message in file.message_types_by_name.items()
        }
        assert actual == messages, file.name


def test_dra_v1beta1_encodes_exactly_like_v1() -> None:
    assert _shape(dra_v1beta1.DESCRIPTOR) == _shape(dra_v1.DESCRIPTOR)


def _shape(file: Any) -> object:
    """A file's messages and services with every package name cut off.

    Descriptors are typed Any: protobuf ships no type information.
    """

    def message_shape(message: Any) -> object:
        fields = sorted(
            (f.name, f.number, f.type, f.is_repeated, f.message_type and f.message_type.name)
            for f in message.fields
        )
        nested = sorted((n.name, message_shape(n)) for n in message.nested_types)
        return fields, nested

    messages = {name: message_shape(m) for name, m in file.message_types_by_name.items()}
    services = {
        name: sorted((m.name, m.input_type.name, m.output_type.name) for m in service.methods)
        for name, service in file.services_by_name.items()
    }
    return messages, services


_text = st.text(max_size=20)
_devices = st.builds(
    PreparedDevice,
    pool_name=_text,
    device_name=_text,
    cdi_device_ids=st.tuples(_text, _text),
    request_names=st.lists(_text, max_size=2).map(tuple),
)
_results = st.dictionaries(
    _text,
    st.builds(PrepareResult, devices=st.lists(_devices, max_size=3).map(tuple), error=_text),
    max_size=4,
)


@given(_results)
def test_prepare_results_survive_the_wire(results: dict[str, PrepareResult]) -> None:
    wire = convert.prepare_response(results).SerializeToString()

    decoded = dra_v1beta1.NodePrepareResourcesResponse.FromString(wire)
    again = dra_v1.NodePrepareResourcesResponse.FromString(decoded.SerializeToString())

    assert convert.prepare_results_from_response(again) == results
