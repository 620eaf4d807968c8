"""A simulated kubelet registers its Node and keeps it Ready with a Lease."""

from __future__ import annotations

import msgspec

from shared.kube.client import KubeClient
from shared.kube.resources import LEASES
from sim.kubelet import NODE_LEASE_NAMESPACE
from sim.kubelet.models import Lease
from sim.topology import Cluster
from tests.integration.kubelet.conftest import KubeletFactory
from tests.integration.kubelet.helpers import get_node
from tests.support.wait import wait_for


async def _lease(client: KubeClient, name: str) -> Lease | None:
    raw = await client.get_or_none(LEASES, name, namespace=NODE_LEASE_NAMESPACE)
    return None if raw is None else msgspec.json.decode(raw, type=Lease)


async def test_node_registers_with_labels_capacity_and_addresses(
    kube_client: KubeClient, cluster: Cluster, kubelet_on: KubeletFactory
) -> None:
    node = cluster.nodes[0]
    async with kubelet_on(0):
        registered = await wait_for(
            lambda: get_node(kube_client, node.name), what="node registered"
        )
    labels = registered.metadata.labels
    assert labels["kubernetes.io/hostname"] == node.name
    assert labels["kubernetes.io/os"] == "linux"
    assert labels["node.kubernetes.io/instance-type"] == "gb200"
    assert "nvidia.com/gpu.clique" not in labels  # the health monitor's label
    status = registered.status
    assert status.capacity["nvidia.com/gpu"] == str(len(node.gpus))
    assert status.allocatable["nvidia.com/gpu"] == str(len(node.gpus))
    assert {"cpu", "memory", "pods"} <= set(status.allocatable)
    assert status.allocatable["pods"] == "110"
    assert registered.internal_ip == node.address
    assert {(a.type, a.address) for a in status.addresses} == {
        ("InternalIP", node.address),
        ("Hostname", node.name),
    }
    ready = registered.condition("Ready")
    assert ready is not None
    assert (ready.status, ready.reason) == ("True", "KubeletReady")


async def test_lease_is_renewed_and_node_stays_ready(
    kube_client: KubeClient, cluster: Cluster, kubelet_on: KubeletFactory
) -> None:
    name = cluster.nodes[0].name
    async with kubelet_on(0):
        first = await wait_for(lambda: _lease(kube_client, name), what="node lease")
        assert first.spec.holder_identity == name
        assert first.metadata.owner_references[0].kind == "Node"

        async def renewed() -> Lease | None:
            lease = await _lease(kube_client, name)
            return lease if lease and lease.spec.renew_time != first.spec.renew_time else None

        await wait_for(renewed, what="lease renewed")
        node = await get_node(kube_client, name)
        assert node is not None
        ready = node.condition("Ready")
        assert ready is not None
        assert ready.status == "True"
