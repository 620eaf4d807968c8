"""pynvml's own functions report the topology's identities through the simulated library."""

from __future__ import annotations

import ctypes

import pynvml
import pytest

from sim.nvml import HEALTHY_MASK, SimulatedNvml, bind
from sim.topology import Cluster, parse_topology
from tests.unit.sim.nvml_client import gpu_uuids, read_fabric, read_tray_index


def test_gpu_uuids_by_index_are_the_configured_ones(nvml: SimulatedNvml) -> None:
    assert gpu_uuids() == [gpu.uuid for gpu in nvml.node.gpus]


def test_handle_by_uuid_and_by_pci_bus_id_find_the_same_gpu(nvml: SimulatedNvml) -> None:
    gpu = nvml.node.gpus[2]
    by_uuid = pynvml.nvmlDeviceGetHandleByUUID(gpu.uuid)
    by_bus_id = pynvml.nvmlDeviceGetHandleByPciBusId(gpu.pci_bus_id)
    assert pynvml.nvmlDeviceGetIndex(by_uuid) == pynvml.nvmlDeviceGetIndex(by_bus_id) == 2
    with pytest.raises(pynvml.NVMLError_NotFound):
        pynvml.nvmlDeviceGetHandleByUUID("GPU-00000000-0000-0000-0000-000000000000")


def test_device_identity(nvml: SimulatedNvml) -> None:
    gpu = nvml.node.gpus[1]
    handle = pynvml.nvmlDeviceGetHandleByIndex(1)
    assert pynvml.nvmlDeviceGetName(handle) == "NVIDIA GB200"
    assert pynvml.nvmlDeviceGetSerial(handle) == gpu.serial
    assert pynvml.nvmlDeviceGetMinorNumber(handle) == gpu.minor_number
    assert pynvml.nvmlDeviceGetModuleId(handle) == gpu.module_id
    assert pynvml.nvmlDeviceGetArchitecture(handle) == pynvml.NVML_DEVICE_ARCH_BLACKWELL
    assert pynvml.nvmlDeviceGetCudaComputeCapability(handle) == (10, 0)
    pci = pynvml.nvmlDeviceGetPciInfo(handle)
    assert (pci.busId, pci.domain, pci.bus) == (gpu.pci_bus_id, 0x9, 1)
    memory = pynvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)
    assert memory.total == memory.free + memory.reserved + memory.used


def test_driver_versions_come_from_the_topology(nvml: SimulatedNvml) -> None:
    assert pynvml.nvmlSystemGetDriverVersion() == nvml.node.driver.version
    assert pynvml.nvmlSystemGetCudaDriverVersion_v2() == nvml.node.driver.cuda_version
    assert pynvml.nvmlSystemGetNVMLVersion() == f"12.{nvml.node.driver.version}"


def test_clique_string_from_fabric_info_is_the_nodes_clique(nvml: SimulatedNvml) -> None:
    for index in range(pynvml.nvmlDeviceGetCount()):
        reading = read_fabric(pynvml.nvmlDeviceGetHandleByIndex(index))
        assert reading.clique == nvml.node.clique
        assert reading.state == pynvml.NVML_GPU_FABRIC_STATE_COMPLETED
        assert reading.status == pynvml.NVML_SUCCESS
        assert reading.health_mask == HEALTHY_MASK
        assert reading.health_summary == pynvml.NVML_GPU_FABRIC_HEALTH_SUMMARY_HEALTHY


def test_fabric_info_v2_struct_carries_the_same_clique(nvml: SimulatedNvml) -> None:
    info = pynvml.c_nvmlGpuFabricInfo_v2_t()
    pynvml.nvmlDeviceGetGpuFabricInfoV(pynvml.nvmlDeviceGetHandleByIndex(0), ctypes.byref(info))
    assert bytes(info.clusterUuid) == nvml.node.cluster_uuid_bytes
    assert info.cliqueId == nvml.node.clique_id


def test_every_node_of_a_partitioned_rack_reports_its_own_clique() -> None:
    cluster = parse_topology(
        "racks: [{name: r, cliques: [{id: 1, trays: 0-8}, {id: 2, trays: 9-17}]}]"
    )
    for node in cluster.nodes:
        with bind(SimulatedNvml(node)):
            pynvml.nvmlInit()
            assert read_fabric(pynvml.nvmlDeviceGetHandleByIndex(0)).clique == node.clique
            assert read_tray_index(pynvml.nvmlDeviceGetHandleByIndex(0)) == node.tray_index
            pynvml.nvmlShutdown()
    assert len({node.clique for node in cluster.nodes}) == 2


def test_platform_info_reports_tray_index_and_chassis(cluster: Cluster) -> None:
    node = cluster.node("rack-1-tray13")
    with bind(SimulatedNvml(node)):
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(3)
        assert read_tray_index(handle) == 13
        v2 = pynvml.c_nvmlPlatformInfo_v2_t()
        pynvml.nvmlDeviceGetPlatformInfo(handle, ctypes.byref(v2))
        assert v2.chassisSerialNumber == node.chassis_serial
        assert ord(v2.slotNumber) == node.slot_number
        assert ord(v2.moduleId) == node.gpus[3].module_id
        # The v1 layout carries the same facts under its older field names.
        v1 = pynvml.c_nvmlPlatformInfo_v1_t()
        pynvml.nvmlDeviceGetPlatformInfo(handle, ctypes.byref(v1))
        assert ord(v1.computeSlotIndex) == 13
        assert v1.rackGuid == node.chassis_serial
        pynvml.nvmlShutdown()


def test_event_types_a_gpu_supports_include_xid(nvml: SimulatedNvml) -> None:
    supported = pynvml.nvmlDeviceGetSupportedEventTypes(pynvml.nvmlDeviceGetHandleByIndex(0))
    assert supported & pynvml.nvmlEventTypeXidCriticalError
    assert supported & pynvml.nvmlEventTypeDoubleBitEccError
