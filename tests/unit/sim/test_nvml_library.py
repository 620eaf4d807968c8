"""How the simulated library plugs into pynvml: symbols, node selection, isolation, threads."""

from __future__ import annotations

import asyncio
import ctypes
import threading
import time

import pynvml
import pytest

from sim.nvml import (
    LIBRARY,
    NoNodeSelectedError,
    SimulatedNvml,
    bind,
    bound_context,
    install,
    is_installed,
    uninstall,
)
from sim.topology import Cluster
from tests.support.wait import wait_for_sync
from tests.unit.sim.nvml_client import XidWatcher, gpu_uuids


def test_symbol_the_library_lacks_fails_as_a_missing_symbol(nvml: SimulatedNvml) -> None:
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        pynvml.nvmlDeviceGetPowerUsage(pynvml.nvmlDeviceGetHandleByIndex(0))


def test_calls_need_an_initialised_library(node_nvml: SimulatedNvml) -> None:
    with bind(node_nvml):
        with pytest.raises(pynvml.NVMLError_Uninitialized):
            pynvml.nvmlDeviceGetCount()
        with pytest.raises(pynvml.NVMLError_Uninitialized):
            pynvml.nvmlShutdown()


def test_each_init_needs_its_own_shutdown(node_nvml: SimulatedNvml) -> None:
    with bind(node_nvml):
        pynvml.nvmlInit()
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        assert pynvml.nvmlDeviceGetCount() == 4
        pynvml.nvmlShutdown()
        assert not node_nvml.initialized


def test_call_without_a_selected_node_says_how_to_select_one() -> None:
    install()
    with pytest.raises(NoNodeSelectedError, match=r"sim\.nvml\.bind"):
        pynvml.nvmlInit()


def test_struct_passed_by_value_is_refused(nvml: SimulatedNvml) -> None:
    info = pynvml.c_nvmlGpuFabricInfo_v3_t()
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        pynvml.nvmlDeviceGetGpuFabricInfoV(pynvml.nvmlDeviceGetHandleByIndex(0), info)


def test_too_small_output_buffer_is_insufficient_size(nvml: SimulatedNvml) -> None:
    get_uuid = pynvml._nvmlGetFunctionPointer("nvmlDeviceGetUUID")
    buffer = ctypes.create_string_buffer(10)
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    assert get_uuid(handle, buffer, ctypes.c_uint(10)) == pynvml.NVML_ERROR_INSUFFICIENT_SIZE


def test_handles_are_distinct_non_null_pointers(cluster: Cluster) -> None:
    addresses = set()
    # Both nodes live on: a handle is unique among the handles of living nodes.
    nodes = [SimulatedNvml(node) for node in cluster.nodes[:2]]
    for nvml in nodes:
        with bind(nvml):
            pynvml.nvmlInit()
            for index in range(4):
                handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                assert isinstance(handle, pynvml.c_nvmlDevice_t)
                addresses.add(ctypes.cast(handle, ctypes.c_void_p).value)
            pynvml.nvmlShutdown()
    assert None not in addresses
    assert len(addresses) == 8


def test_another_nodes_handle_is_invalid_here(cluster: Cluster) -> None:
    first, second = SimulatedNvml(cluster.nodes[0]), SimulatedNvml(cluster.nodes[1])
    with bind(first):
        pynvml.nvmlInit()
        foreign = pynvml.nvmlDeviceGetHandleByIndex(0)
    with bind(second):
        pynvml.nvmlInit()
        with pytest.raises(pynvml.NVMLError_InvalidArgument):
            pynvml.nvmlDeviceGetUUID(foreign)
        pynvml.nvmlShutdown()
    with bind(first):
        pynvml.nvmlShutdown()


def test_init_on_one_node_does_not_initialise_another(cluster: Cluster) -> None:
    first, second = SimulatedNvml(cluster.nodes[0]), SimulatedNvml(cluster.nodes[1])
    with bind(first):
        pynvml.nvmlInit()
    with bind(second), pytest.raises(pynvml.NVMLError_Uninitialized):
        pynvml.nvmlDeviceGetCount()
    assert first.initialized
    with bind(first):
        pynvml.nvmlShutdown()


async def test_two_nodes_in_one_process_stay_isolated(cluster: Cluster) -> None:
    nodes = [SimulatedNvml(cluster.nodes[0]), SimulatedNvml(cluster.node("rack-1-tray17"))]

    async def watch(nvml: SimulatedNvml) -> tuple[list[str], list[int]]:
        """A per-node service: reads its GPUs, then waits for XIDs in a worker thread."""
        pynvml.nvmlInit()
        uuids = await asyncio.to_thread(gpu_uuids)
        watcher = XidWatcher([pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(4)])
        xids = []
        while True:
            try:
                xid, _ = await asyncio.to_thread(watcher.next, timeout_ms=300)
            except pynvml.NVMLError_Timeout:
                break
            xids.append(xid)
        watcher.close()
        pynvml.nvmlShutdown()
        return uuids, xids

    tasks = []
    for nvml in nodes:
        with bind(nvml):
            tasks.append(asyncio.create_task(watch(nvml)))
    # Both services are waiting once each node has its event set.
    await asyncio.to_thread(
        wait_for_sync, lambda: all(nvml.open_event_sets for nvml in nodes), what="watchers"
    )
    nodes[0].raise_xid(1, 48)
    nodes[0].raise_xid(3, 79)
    (first_uuids, first_xids), (second_uuids, second_xids) = await asyncio.gather(*tasks)
    assert first_uuids == [gpu.uuid for gpu in nodes[0].node.gpus]
    assert second_uuids == [gpu.uuid for gpu in nodes[1].node.gpus]
    assert first_xids == [48, 79]
    assert second_xids == []


async def test_task_started_inside_bind_keeps_its_node_after_the_block(
    node_nvml: SimulatedNvml,
) -> None:
    async def count_later(started: asyncio.Event) -> int:
        await started.wait()
        pynvml.nvmlInit()
        count: int = pynvml.nvmlDeviceGetCount()
        pynvml.nvmlShutdown()
        return count

    started = asyncio.Event()
    with bind(node_nvml):
        task = asyncio.create_task(count_later(started))
    started.set()
    assert await task == 4


def test_bound_context_selects_the_node_for_a_plain_thread(node_nvml: SimulatedNvml) -> None:
    results: list[list[str]] = []

    def read() -> None:
        pynvml.nvmlInit()
        results.append(gpu_uuids())
        pynvml.nvmlShutdown()

    thread = threading.Thread(target=bound_context(node_nvml).run, args=(read,))
    thread.start()
    thread.join(timeout=10)
    assert results == [[gpu.uuid for gpu in node_nvml.node.gpus]]


def test_freeing_an_event_set_wakes_its_waiter(nvml: SimulatedNvml) -> None:
    event_set = pynvml.nvmlEventSetCreate()
    pynvml.nvmlDeviceRegisterEvents(
        pynvml.nvmlDeviceGetHandleByIndex(0), pynvml.nvmlEventTypeXidCriticalError, event_set
    )
    outcome: list[type[BaseException]] = []

    def wait() -> None:
        try:
            pynvml.nvmlEventSetWait_v2(event_set, 30_000)
        except pynvml.NVMLError as error:
            outcome.append(type(error))

    started = time.monotonic()
    thread = threading.Thread(target=bound_context(nvml).run, args=(wait,))
    thread.start()
    pynvml.nvmlEventSetFree(event_set)
    thread.join(timeout=10)
    assert outcome == [pynvml.NVMLError_InvalidArgument]
    assert time.monotonic() - started < 10


def test_uninstall_gives_pynvml_back_its_previous_library() -> None:
    install()
    assert is_installed()
    uninstall()
    assert not is_installed()
    # Nothing was loaded before the simulation here: pynvml would load the real one next.
    restored: object = pynvml.nvmlLib
    assert restored is None
    install()
    installed: object = pynvml.nvmlLib
    assert installed is LIBRARY
