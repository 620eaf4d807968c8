"""Every injected fault surfaces through the matching pynvml call or event wait, and clears."""

from __future__ import annotations

import asyncio
import ctypes
import time

import pynvml
import pytest

from sim.nvml import HEALTHY_MASK, HealthField, SimulatedNvml, bind, health_field
from tests.unit.sim.nvml_client import XidWatcher, read_fabric


def handle(index: int) -> object:
    return pynvml.nvmlDeviceGetHandleByIndex(index)


async def test_xid_reaches_a_client_blocked_in_event_wait(nvml: SimulatedNvml) -> None:
    watcher = XidWatcher([handle(index) for index in range(4)])
    # The waiting thread inherits the test's context, hence its node selection.
    waiting = asyncio.ensure_future(asyncio.to_thread(watcher.next, timeout_ms=10_000))
    nvml.raise_xid(2, 79)
    xid, gpu_uuid = await asyncio.wait_for(waiting, timeout=10)
    assert (xid, gpu_uuid) == (79, nvml.node.gpus[2].uuid)
    watcher.close()
    assert nvml.open_event_sets == 0


def test_xids_are_delivered_one_by_one_in_order(nvml: SimulatedNvml) -> None:
    watcher = XidWatcher([handle(0), handle(1)])
    for gpu, xid in [(0, 13), (1, 48), (0, 94)]:
        nvml.raise_xid(gpu, xid)
    received = [watcher.next(timeout_ms=1000) for _ in range(3)]
    assert [xid for xid, _ in received] == [13, 48, 94]
    assert [gpu_uuid for _, gpu_uuid in received] == [
        nvml.node.gpus[0].uuid,
        nvml.node.gpus[1].uuid,
        nvml.node.gpus[0].uuid,
    ]
    watcher.close()


def test_xid_on_an_unregistered_gpu_is_not_delivered(nvml: SimulatedNvml) -> None:
    watcher = XidWatcher([handle(0)])
    nvml.raise_xid(1, 79)
    with pytest.raises(pynvml.NVMLError_Timeout):
        watcher.next(timeout_ms=0)
    watcher.close()


def test_event_wait_times_out_after_the_requested_time(nvml: SimulatedNvml) -> None:
    watcher = XidWatcher([handle(0)])
    started = time.monotonic()
    with pytest.raises(pynvml.NVMLError_Timeout):
        watcher.next(timeout_ms=150)
    assert time.monotonic() - started >= 0.14
    watcher.close()


def test_event_data_describes_a_whole_gpu(nvml: SimulatedNvml) -> None:
    event_set = pynvml.nvmlEventSetCreate()
    pynvml.nvmlDeviceRegisterEvents(handle(3), pynvml.nvmlEventTypeXidCriticalError, event_set)
    nvml.raise_xid(3, 119)
    data = pynvml.nvmlEventSetWait_v2(event_set, 1000)
    assert data.eventType == pynvml.nvmlEventTypeXidCriticalError
    assert data.eventData == 119
    assert pynvml.nvmlDeviceGetIndex(data.device) == 3
    assert data.gpuInstanceId == data.computeInstanceId == 0xFFFF_FFFF
    pynvml.nvmlEventSetFree(event_set)


def test_lost_gpu_fails_every_call_with_gpu_is_lost_until_cleared(nvml: SimulatedNvml) -> None:
    lost = handle(1)
    nvml.set_gpu_lost(1)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        pynvml.nvmlDeviceGetUUID(lost)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        read_fabric(lost)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        pynvml.nvmlDeviceGetHandleByIndex(1)
    # The others answer, and the count still includes the lost GPU.
    assert pynvml.nvmlDeviceGetUUID(handle(0)) == nvml.node.gpus[0].uuid
    assert pynvml.nvmlDeviceGetCount() == 4
    nvml.set_gpu_lost(1, lost=False)
    assert pynvml.nvmlDeviceGetUUID(lost) == nvml.node.gpus[1].uuid


def test_event_wait_reports_a_lost_gpu_after_its_pending_events(nvml: SimulatedNvml) -> None:
    event_set = pynvml.nvmlEventSetCreate()
    pynvml.nvmlDeviceRegisterEvents(handle(0), pynvml.nvmlEventTypeXidCriticalError, event_set)
    nvml.raise_xid(0, 79)
    nvml.set_gpu_lost(0)
    assert pynvml.nvmlEventSetWait_v2(event_set, 1000).eventData == 79
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        pynvml.nvmlEventSetWait_v2(event_set, 1000)
    pynvml.nvmlEventSetFree(event_set)


def test_dropped_nvlink_is_inactive_until_restored(nvml: SimulatedNvml) -> None:
    gpu = handle(2)
    assert pynvml.nvmlDeviceGetNvLinkState(gpu, 5) == pynvml.NVML_FEATURE_ENABLED
    nvml.drop_nvlink(2, 5)
    assert pynvml.nvmlDeviceGetNvLinkState(gpu, 5) == pynvml.NVML_FEATURE_DISABLED
    assert pynvml.nvmlDeviceGetNvLinkState(gpu, 4) == pynvml.NVML_FEATURE_ENABLED
    state, active_links = pynvml.nvmlDeviceGetFieldValues(
        gpu,
        [
            (pynvml.NVML_FI_DEV_NVLINK_GET_STATE, 5),
            pynvml.NVML_FI_DEV_NVSWITCH_CONNECTED_LINK_COUNT,
        ],
    )
    assert state.value.uiVal == pynvml.NVML_NVLINK_STATE_INACTIVE
    assert active_links.value.uiVal == 17
    nvml.restore_nvlink(2, 5)
    assert pynvml.nvmlDeviceGetNvLinkState(gpu, 5) == pynvml.NVML_FEATURE_ENABLED


def test_nvlink_index_beyond_the_gpus_links_is_invalid(nvml: SimulatedNvml) -> None:
    (count,) = pynvml.nvmlDeviceGetFieldValues(handle(0), [pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT])
    assert count.value.uiVal == 18
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        pynvml.nvmlDeviceGetNvLinkState(handle(0), 18)


def test_nvlink_error_counters(nvml: SimulatedNvml) -> None:
    nvml.add_nvlink_errors(0, 3, replay=2, crc_flit=5, recoveries_failed=1)
    nvml.add_nvlink_errors(0, 4, crc_flit=1)
    gpu = handle(0)
    assert pynvml.nvmlDeviceGetNvLinkErrorCounter(gpu, 3, pynvml.NVML_NVLINK_ERROR_DL_REPLAY) == 2
    flit_total, failed = pynvml.nvmlDeviceGetFieldValues(
        gpu,
        [
            pynvml.NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL,
            (pynvml.NVML_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_FAILED_EVENTS, 3),
        ],
    )
    assert (flit_total.value.ullVal, failed.value.ullVal) == (6, 1)


def test_fabric_state_and_status_are_visible(nvml: SimulatedNvml) -> None:
    nvml.set_fabric(state=pynvml.NVML_GPU_FABRIC_STATE_IN_PROGRESS)
    reading = read_fabric(handle(0))
    assert reading.state == pynvml.NVML_GPU_FABRIC_STATE_IN_PROGRESS
    # No clique is reported before registration completes.
    assert reading.clique == "00000000-0000-0000-0000-000000000000.0"
    nvml.set_fabric(
        1, state=pynvml.NVML_GPU_FABRIC_STATE_COMPLETED, status=pynvml.NVML_ERROR_NOT_READY
    )
    assert read_fabric(handle(1)).status == pynvml.NVML_ERROR_NOT_READY
    nvml.reset_fabric()
    assert read_fabric(handle(0)).clique == nvml.node.clique


def test_fabric_health_bits_and_summary_are_visible(nvml: SimulatedNvml) -> None:
    nvml.set_fabric_health(
        0, HealthField.ROUTE_UNHEALTHY, pynvml.NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_TRUE
    )
    nvml.set_fabric(0, health_summary=pynvml.NVML_GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY)
    reading = read_fabric(handle(0))
    assert (
        health_field(reading.health_mask, HealthField.ROUTE_UNHEALTHY)
        == pynvml.NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_TRUE
    )
    assert health_field(reading.health_mask, HealthField.DEGRADED_BW) == (
        pynvml.NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_FALSE
    )
    assert reading.health_summary == pynvml.NVML_GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY
    assert read_fabric(handle(1)).health_mask == HEALTHY_MASK
    nvml.reset_fabric(0)
    assert read_fabric(handle(0)).health_mask == HEALTHY_MASK


def test_gpus_of_a_node_can_disagree_on_their_clique(nvml: SimulatedNvml) -> None:
    nvml.set_fabric(3, clique_id=nvml.node.clique_id + 1)
    cliques = {read_fabric(handle(index)).clique for index in range(4)}
    assert len(cliques) == 2


def test_driver_without_fabric_info_v3_refuses_it_and_v2_still_answers(
    nvml: SimulatedNvml,
) -> None:
    nvml.set_fabric_info_v3_supported(False)
    info = pynvml.c_nvmlGpuFabricInfo_v3_t()
    with pytest.raises(pynvml.NVMLError_ArgumentVersionMismatch):
        pynvml.nvmlDeviceGetGpuFabricInfoV(handle(0), ctypes.byref(info))
    reading = read_fabric(handle(0))
    assert reading.version == pynvml.nvmlGpuFabricInfo_v2
    assert reading.health_summary is None
    assert reading.clique == nvml.node.clique


def test_unknown_fabric_info_version_is_a_version_mismatch(nvml: SimulatedNvml) -> None:
    info = pynvml.c_nvmlGpuFabricInfo_v3_t()
    info.version = (4 << 24) | ctypes.sizeof(info)
    with pytest.raises(pynvml.NVMLError_ArgumentVersionMismatch):
        pynvml.nvmlDeviceGetGpuFabricInfoV(handle(0), ctypes.byref(info))


def test_ecc_errors_count_up_raise_an_event_and_clear(nvml: SimulatedNvml) -> None:
    event_set = pynvml.nvmlEventSetCreate()
    pynvml.nvmlDeviceRegisterEvents(handle(1), pynvml.nvmlEventTypeDoubleBitEccError, event_set)
    nvml.add_ecc_errors(1, uncorrected=2)
    count = pynvml.nvmlDeviceGetTotalEccErrors(
        handle(1), pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC
    )
    assert count == 2
    (aggregate,) = pynvml.nvmlDeviceGetFieldValues(
        handle(1), [pynvml.NVML_FI_DEV_ECC_DBE_AGG_TOTAL]
    )
    assert aggregate.value.ullVal == 2
    event = pynvml.nvmlEventSetWait_v2(event_set, 1000)
    assert event.eventType == pynvml.nvmlEventTypeDoubleBitEccError
    nvml.clear_ecc_errors(1)
    assert (
        pynvml.nvmlDeviceGetTotalEccErrors(
            handle(1), pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_AGGREGATE_ECC
        )
        == 0
    )
    pynvml.nvmlEventSetFree(event_set)


def test_remapped_rows_are_visible_and_clear(nvml: SimulatedNvml) -> None:
    nvml.set_remapped_rows(2, uncorrectable=3, pending=True)
    assert pynvml.nvmlDeviceGetRemappedRows(handle(2)) == (0, 3, 1, 0)
    (failure,) = pynvml.nvmlDeviceGetFieldValues(handle(2), [pynvml.NVML_FI_DEV_REMAPPED_UNC])
    assert failure.value.uiVal == 3
    nvml.clear_remapped_rows(2)
    assert pynvml.nvmlDeviceGetRemappedRows(handle(2)) == (0, 0, 0, 0)


def test_page_retirement_is_not_supported_on_a_gpu_with_row_remapping(nvml: SimulatedNvml) -> None:
    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlDeviceGetRetiredPagesPendingStatus(handle(0))


def test_recovery_action_field_and_event(nvml: SimulatedNvml) -> None:
    event_set = pynvml.nvmlEventSetCreate()
    pynvml.nvmlDeviceRegisterEvents(handle(0), pynvml.nvmlEventTypeGpuRecoveryAction, event_set)
    nvml.set_recovery_action(0, pynvml.NVML_GPU_RECOVERY_ACTION_GPU_RESET)
    (action,) = pynvml.nvmlDeviceGetFieldValues(
        handle(0), [pynvml.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION]
    )
    assert action.nvmlReturn == pynvml.NVML_SUCCESS
    assert action.value.uiVal == pynvml.NVML_GPU_RECOVERY_ACTION_GPU_RESET
    assert pynvml.nvmlEventSetWait_v2(event_set, 1000).eventData == (
        pynvml.NVML_GPU_RECOVERY_ACTION_GPU_RESET
    )
    nvml.set_recovery_action(0, pynvml.NVML_GPU_RECOVERY_ACTION_NONE)
    (action,) = pynvml.nvmlDeviceGetFieldValues(
        handle(0), [pynvml.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION]
    )
    assert action.value.uiVal == pynvml.NVML_GPU_RECOVERY_ACTION_NONE
    pynvml.nvmlEventSetFree(event_set)


def test_unavailable_nvml_fails_init_and_calls(node_nvml: SimulatedNvml) -> None:
    node_nvml.set_unavailable(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    with bind(node_nvml):
        with pytest.raises(pynvml.NVMLError_LibraryNotFound):
            pynvml.nvmlInit()
        node_nvml.set_available()
        pynvml.nvmlInit()
        node_nvml.set_unavailable()
        with pytest.raises(pynvml.NVMLError_DriverNotLoaded):
            pynvml.nvmlDeviceGetCount()
        node_nvml.set_available()
        assert pynvml.nvmlDeviceGetCount() == 4
        pynvml.nvmlShutdown()


def test_clear_faults_restores_a_healthy_node(nvml: SimulatedNvml) -> None:
    nvml.set_gpu_lost(0)
    nvml.drop_nvlink(1, 0)
    nvml.set_fabric(state=pynvml.NVML_GPU_FABRIC_STATE_NOT_STARTED)
    nvml.add_ecc_errors(2, corrected=4)
    nvml.set_remapped_rows(3, failure=True)
    nvml.clear_faults()
    assert pynvml.nvmlDeviceGetNvLinkState(handle(1), 0) == pynvml.NVML_FEATURE_ENABLED
    for index in range(4):
        reading = read_fabric(handle(index))
        assert (reading.clique, reading.health_mask) == (nvml.node.clique, HEALTHY_MASK)
    assert pynvml.nvmlDeviceGetRemappedRows(handle(3)) == (0, 0, 0, 0)


def test_fault_on_a_gpu_the_node_lacks_is_refused(node_nvml: SimulatedNvml) -> None:
    with pytest.raises(IndexError, match=r"GPUs 0\.\.3"):
        node_nvml.raise_xid(4, 79)
    with pytest.raises(IndexError, match=r"NVLinks 0\.\.17"):
        node_nvml.drop_nvlink(0, 18)
