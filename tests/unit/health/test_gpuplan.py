"""How one GPU of a node can be acted on: DRA needs DeviceTaintRule, the device plugin needs
PodResources; otherwise every fault of the node is node-level."""

from __future__ import annotations

import pytest

from services.health_monitor.gpuplan import Publishing, publishing
from shared.kube.meta import ObjectMeta
from shared.kube.models import Node, NodeStatus, ResourcePool, ResourceSlice, ResourceSliceSpec

NODE = Node(metadata=ObjectMeta(name="n1"), status=NodeStatus(capacity={"nvidia.com/gpu": "4"}))
PLAIN = Node(metadata=ObjectMeta(name="n1"))
DRA_SLICE = ResourceSlice(
    metadata=ObjectMeta(name="n1-gpu"),
    spec=ResourceSliceSpec(driver="gpu.nvidia.com", node_name="n1", pool=ResourcePool(name="n1")),
)


@pytest.mark.parametrize(
    ("node", "slices", "pod_resources", "rules", "expected"),
    [
        (PLAIN, [DRA_SLICE], False, True, Publishing.DRA),
        (PLAIN, [DRA_SLICE], False, False, None),
        # DRA GPUs on a server without rules: evicting device-plugin holders would miss them.
        (NODE, [DRA_SLICE], True, False, None),
        (NODE, [], True, False, Publishing.DEVICE_PLUGIN),
        (NODE, [], False, True, None),
        (PLAIN, [], True, True, None),
    ],
)
def test_publishing(
    node: Node,
    slices: list[ResourceSlice],
    pod_resources: bool,
    rules: bool,
    expected: Publishing | None,
) -> None:
    found = publishing(node, slices, pod_resources=pod_resources, device_taint_rules=rules)
    assert found is expected
