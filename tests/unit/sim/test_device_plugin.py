"""Pure parts of the device plugin path: which XIDs NVIDIA's plugin acts on, which registrations
the kubelet refuses, and how the kubelet's device manager follows a plugin's device lists."""

from __future__ import annotations

import msgspec
import pytest

from shared.kube.keys import ObjectKey
from shared.kubeletapi.deviceplugin import HEALTHY, UNHEALTHY, Device, Registration
from sim.deviceplugin import SKIPPED_XIDS, makes_unhealthy
from sim.kubelet.deviceplugins import refusal
from sim.kubelet.devices import DeviceCheckpoint, DeviceManager, GpuCount
from sim.kubelet.models import Pod
from sim.topology import parse_topology

NODE = parse_topology("name: t\nnodes_per_rack: 1\nracks:\n  - name: r0\n").nodes[0]
UUIDS = [gpu.uuid for gpu in NODE.gpus]


@pytest.mark.parametrize(
    ("xid", "disabled", "enabled", "unhealthy"),
    [
        (79, (), (), True),
        (48, (), (), True),
        (13, (), (), False),
        (109, (), (), False),
        (79, (79,), (), False),
        (13, (), (13,), True),
    ],
)
def test_xids_that_mark_a_gpu_unhealthy(
    xid: int, disabled: tuple[int, ...], enabled: tuple[int, ...], unhealthy: bool
) -> None:
    assert makes_unhealthy(xid, disabled=disabled, enabled=enabled) is unhealthy
    assert frozenset({13, 31, 43, 45, 68, 109}) == SKIPPED_XIDS


def _registration(**changes: str) -> Registration:
    plain = Registration(
        version="v1beta1", endpoint="nvidia-gpu.sock", resource_name="nvidia.com/gpu"
    )
    return msgspec.structs.replace(plain, **changes)


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({}, None),
        ({"version": "v1alpha"}, "version"),
        ({"resource_name": "example.com/fpga"}, "resource"),
        ({"endpoint": "../escape.sock"}, "endpoint"),
        ({"endpoint": "kubelet.sock"}, "endpoint"),
        ({"endpoint": ""}, "endpoint"),
    ],
)
def test_registrations_the_kubelet_refuses(changes: dict[str, str], reason: str | None) -> None:
    said = refusal(_registration(**changes), resource="nvidia.com/gpu")
    assert (said is None) if reason is None else (said is not None and reason in said)


def _decode_pod(gpus: int) -> Pod:
    body = {
        "metadata": {"name": "p", "namespace": "default", "uid": "u1"},
        "spec": {
            "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]
        },
    }
    return msgspec.convert(body, Pod)


def test_the_plugin_source_reports_nothing_until_a_plugin_lists_devices() -> None:
    manager = DeviceManager(NODE, checkpoint=DeviceCheckpoint(), source="plugin")
    assert manager.counts() is None
    manager.update([Device(id=u) for u in UUIDS])
    assert manager.counts() == GpuCount(capacity=4, allocatable=4)
    manager.update([Device(id=u, health=UNHEALTHY if u == UUIDS[2] else HEALTHY) for u in UUIDS])
    assert manager.counts() == GpuCount(capacity=4, allocatable=3)
    record = manager.allocate(ObjectKey(namespace="default", name="p"), _decode_pod(3))
    assert record.containers == {"main": (UUIDS[0], UUIDS[1], UUIDS[3])}
    manager.plugin_gone()
    assert manager.counts() == GpuCount(capacity=4, allocatable=0)
    manager.reboot()  # a restarted kubelet: the resource at 0 until the plugin registers again
    assert manager.counts() == GpuCount(capacity=0, allocatable=0)


def test_the_topology_source_lists_the_gpus_healthy_after_every_reboot() -> None:
    manager = DeviceManager(NODE, checkpoint=DeviceCheckpoint())
    assert manager.counts() == GpuCount(capacity=4, allocatable=4)
    manager.set_health(UUIDS[0], UNHEALTHY)
    assert manager.healthy() == tuple(UUIDS[1:])
    manager.reboot()
    assert manager.counts() == GpuCount(capacity=4, allocatable=4)


def test_a_dra_only_node_reports_no_gpu_resource() -> None:
    dra = parse_topology("name: t\nnodes_per_rack: 1\nracks:\n  - name: r0\n    gpu_api: dra\n")
    manager = DeviceManager(dra.nodes[0], checkpoint=DeviceCheckpoint())
    assert manager.counts() is None
