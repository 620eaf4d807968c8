"""The health monitor's NVML reading and classification, end to end on a simulated node."""

from __future__ import annotations

import asyncio
from contextlib import aclosing

import pynvml

from services.health_monitor import (
    Action,
    Severity,
    classify,
    event_signal,
    node_signals,
    read_node,
    worst,
)
from services.health_monitor.signals import (
    EccUncorrected,
    FabricNotReady,
    GpuLost,
    NvmlUnavailable,
    XidError,
)
from shared.nvml import PynvmlNvml, subscribed, watch_events
from sim.nvml import SimulatedNvml
from sim.topology import Cluster
from tests.integration.nvml.conftest import NvmlFactory


def test_healthy_node_reads_clean(nvml: PynvmlNvml) -> None:
    reading = read_node(nvml)
    assert reading.unavailable is None
    assert len(reading.gpus) == 4
    assert all(gpu.errors == () for gpu in reading.gpus)
    assert node_signals(reading, previous=reading) == []


def test_node_with_the_older_driver_reads_clean(
    partitioned: Cluster, open_node: NvmlFactory
) -> None:
    _, nvml = open_node(partitioned.racks["rack-1"][3])
    reading = read_node(nvml)
    assert {gpu.fabric.version for gpu in reading.gpus if gpu.fabric} == {2}
    assert node_signals(reading) == []


async def test_xid_79_then_gpu_lost(sim: SimulatedNvml, nvml: PynvmlNvml) -> None:
    async with subscribed(nvml) as subscription:
        sim.raise_xid(1, 79)
        async with aclosing(watch_events(subscription)) as stream:
            event = await asyncio.wait_for(anext(stream), timeout=5)
    signal = event_signal(event)
    assert signal == XidError(gpu=1, xid=79)
    verdict = classify(signal)
    assert (verdict.severity, verdict.action) == (Severity.FATAL, Action.DRAIN_NODE)

    sim.set_gpu_lost(1)
    signals = node_signals(await asyncio.to_thread(read_node, nvml))
    assert signals == [GpuLost(gpu=1)]
    assert worst(classify(s) for s in signals) is Severity.FATAL


def test_fabric_in_progress_is_a_warning(sim: SimulatedNvml, nvml: PynvmlNvml) -> None:
    sim.set_fabric(state=pynvml.NVML_GPU_FABRIC_STATE_IN_PROGRESS)
    signals = node_signals(read_node(nvml))
    assert signals == [
        FabricNotReady(gpu=gpu, state=pynvml.NVML_GPU_FABRIC_STATE_IN_PROGRESS) for gpu in range(4)
    ]
    assert worst(classify(s) for s in signals) is Severity.WARNING


def test_ecc_rise_between_two_readings(sim: SimulatedNvml, nvml: PynvmlNvml) -> None:
    before = read_node(nvml)
    sim.add_ecc_errors(0, uncorrected=3)
    assert node_signals(read_node(nvml), previous=before) == [
        EccUncorrected(gpu=0, increase=3, total=3)
    ]


def test_nvml_unavailable_is_reported_not_raised(sim: SimulatedNvml, nvml: PynvmlNvml) -> None:
    sim.set_unavailable()
    reading = read_node(nvml)
    assert reading.unavailable is not None
    (signal,) = node_signals(reading)
    assert isinstance(signal, NvmlUnavailable)
    assert classify(signal).severity is Severity.WARNING
