"""Fabric info (v3, and the v2 fallback) and the node clique computed from it."""

from __future__ import annotations

import uuid

import pynvml

from shared.nvml import (
    CliqueStatus,
    FabricHealthSummary,
    FabricInfo,
    FabricState,
    HealthField,
    PynvmlNvml,
    health_faults,
    node_clique,
)
from sim.nvml import HealthField as SimHealthField
from sim.nvml import SimulatedNvml
from sim.topology import Cluster
from tests.integration.nvml.conftest import NvmlFactory


def read_all(nvml: PynvmlNvml) -> list[FabricInfo]:
    return [nvml.fabric_info(gpu) for gpu in range(nvml.device_count())]


def test_clique_from_fabric_info_v3(sim: SimulatedNvml, nvml: PynvmlNvml) -> None:
    fabric = read_all(nvml)
    assert {info.version for info in fabric} == {3}
    assert all(info.health_summary == FabricHealthSummary.HEALTHY for info in fabric)
    assert all(health_faults(info.health_mask) == () for info in fabric)
    clique = node_clique(fabric)
    assert clique.status is CliqueStatus.READY
    assert clique.clique == sim.node.clique
    assert clique.cluster_uuid == uuid.UUID(bytes=sim.node.cluster_uuid_bytes)
    assert clique.clique_id == sim.node.clique_id


def test_clique_from_fabric_info_v2_when_the_driver_refuses_v3(
    sim: SimulatedNvml, nvml: PynvmlNvml
) -> None:
    sim.set_fabric_info_v3_supported(False)
    fabric = read_all(nvml)
    assert {info.version for info in fabric} == {2}
    assert all(info.health_summary is None for info in fabric)
    assert node_clique(fabric).clique == sim.node.clique


def test_rack_with_an_older_driver_falls_back_to_v2(
    partitioned: Cluster, open_node: NvmlFactory
) -> None:
    node = partitioned.racks["rack-1"][0]
    assert not node.driver.fabric_info_v3
    _, nvml = open_node(node)
    fabric = read_all(nvml)
    assert {info.version for info in fabric} == {2}
    assert node_clique(fabric).clique == node.clique


def test_partitions_of_one_rack_are_different_cliques(
    partitioned: Cluster, open_node: NvmlFactory
) -> None:
    first, last = partitioned.racks["rack-0"][0], partitioned.racks["rack-0"][17]
    _, nvml = open_node(first)
    assert node_clique(read_all(nvml)).clique == first.clique
    assert first.clique != last.clique
    assert first.cluster_uuid == last.cluster_uuid


def test_unpartitioned_racks_share_a_clique_id_but_not_a_clique(
    cluster: Cluster, open_node: NvmlFactory
) -> None:
    a, b = cluster.racks["rack-0"][0], cluster.racks["rack-1"][0]
    assert a.clique_id == b.clique_id
    _, nvml = open_node(a)
    clique = node_clique(read_all(nvml)).clique
    assert clique == a.clique != b.clique


def test_no_clique_while_registration_is_in_progress(sim: SimulatedNvml, nvml: PynvmlNvml) -> None:
    sim.set_fabric(gpu=2, state=pynvml.NVML_GPU_FABRIC_STATE_IN_PROGRESS)
    fabric = read_all(nvml)
    assert fabric[2].state == FabricState.IN_PROGRESS
    clique = node_clique(fabric)
    assert clique.status is CliqueStatus.PENDING
    assert clique.clique is None
    assert clique.gpus == (2,)

    sim.set_fabric(gpu=2, state=pynvml.NVML_GPU_FABRIC_STATE_COMPLETED)
    assert node_clique(read_all(nvml)).clique == sim.node.clique


def test_no_clique_when_registration_failed(sim: SimulatedNvml, nvml: PynvmlNvml) -> None:
    sim.set_fabric(gpu=0, status=pynvml.NVML_ERROR_UNKNOWN)
    clique = node_clique(read_all(nvml))
    assert clique.status is CliqueStatus.FAILED
    assert clique.gpus == (0,)


def test_disagreeing_gpus_are_named(sim: SimulatedNvml, nvml: PynvmlNvml) -> None:
    other = "6f0b6a9c-1b8e-4a52-9e2b-2a1e5b7a0c11"
    sim.set_fabric(gpu=3, cluster_uuid=other)
    clique = node_clique(read_all(nvml))
    assert clique.status is CliqueStatus.DISAGREE
    assert clique.clique is None
    groups = {group.clique: group.gpus for group in clique.groups}
    assert groups == {sim.node.clique: (0, 1, 2), f"{other}.{sim.node.clique_id}": (3,)}


def test_health_mask_faults_are_decoded(sim: SimulatedNvml, nvml: PynvmlNvml) -> None:
    sim.set_fabric_health(
        1, SimHealthField.ROUTE_UNHEALTHY, pynvml.NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_TRUE
    )
    sim.set_fabric(gpu=1, health_summary=pynvml.NVML_GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY)
    info = nvml.fabric_info(1)
    assert [fault.field for fault in health_faults(info.health_mask)] == [
        HealthField.ROUTE_UNHEALTHY
    ]
    assert info.health_summary == FabricHealthSummary.UNHEALTHY
    # Health faults do not take the GPU out of its clique.
    assert node_clique(read_all(nvml)).clique == sim.node.clique
