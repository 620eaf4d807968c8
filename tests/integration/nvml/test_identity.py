"""Identity, driver and platform placement read through the interface."""

from __future__ import annotations

from shared.nvml import PynvmlNvml, node_placement
from sim.nvml import SimulatedNvml
from sim.topology import Cluster
from tests.integration.nvml.conftest import NvmlFactory


def test_identity_of_every_gpu_matches_the_node(sim: SimulatedNvml, nvml: PynvmlNvml) -> None:
    assert nvml.device_count() == len(sim.node.gpus)
    for gpu in sim.node.gpus:
        identity = nvml.identity(gpu.index)
        assert identity.index == gpu.index
        assert identity.uuid == gpu.uuid
        assert identity.pci_bus_id == gpu.pci_bus_id
        assert identity.name


def test_driver_version(sim: SimulatedNvml, nvml: PynvmlNvml) -> None:
    assert nvml.driver_version() == sim.node.driver.version


def test_platform_info_gives_tray_slot_and_chassis(sim: SimulatedNvml, nvml: PynvmlNvml) -> None:
    platforms = [nvml.platform_info(gpu.index) for gpu in sim.node.gpus]
    for gpu, info in zip(sim.node.gpus, platforms, strict=True):
        assert info is not None
        assert info.version == 2
        assert info.tray_index == sim.node.tray_index
        assert info.slot_number == sim.node.slot_number
        assert info.module_id == gpu.module_id
        assert info.chassis_serial == sim.node.chassis_serial
    placement = node_placement(platforms)
    assert placement is not None
    assert placement.tray_index == sim.node.tray_index


def test_every_tray_of_a_rack_reads_its_own_tray_index(
    cluster: Cluster, open_node: NvmlFactory
) -> None:
    # Trays past the switch trays get higher slot numbers; raw bytes read as numbers.
    node = cluster.racks["rack-0"][17]
    _, nvml = open_node(node)
    info = nvml.platform_info(0)
    assert info is not None
    assert (info.tray_index, info.slot_number) == (node.tray_index, node.slot_number)
