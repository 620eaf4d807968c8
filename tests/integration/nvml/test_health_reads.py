"""Polled health readings, GPU loss and NVML unavailability through the interface."""

from __future__ import annotations

import subprocess
import sys

import pynvml
import pytest

from shared.nvml import (
    GpuLostError,
    NvmlUnavailableError,
    PynvmlNvml,
    RecoveryAction,
)
from sim.nvml import NVLINKS_PER_GPU, SimulatedNvml, bind


def test_nvlink_states_show_dropped_links(sim: SimulatedNvml, nvml: PynvmlNvml) -> None:
    healthy = nvml.nvlink_states(0)
    assert len(healthy.active) == NVLINKS_PER_GPU
    assert healthy.down == ()
    sim.drop_nvlink(0, 3)
    sim.drop_nvlink(0, 17)
    assert nvml.nvlink_states(0).down == (3, 17)
    sim.restore_nvlink(0, 3)
    assert nvml.nvlink_states(0).down == (17,)


def test_uncorrected_ecc_totals(sim: SimulatedNvml, nvml: PynvmlNvml) -> None:
    assert nvml.ecc_errors(1).uncorrected_volatile == 0
    sim.add_ecc_errors(1, corrected=5, uncorrected=2)
    counts = nvml.ecc_errors(1)
    assert (counts.uncorrected_volatile, counts.uncorrected_aggregate) == (2, 2)


def test_remapped_rows(sim: SimulatedNvml, nvml: PynvmlNvml) -> None:
    sim.set_remapped_rows(2, uncorrectable=1, pending=True)
    rows = nvml.remapped_rows(2)
    assert (rows.uncorrectable, rows.pending, rows.failure) == (1, True, False)
    sim.set_remapped_rows(2, failure=True)
    assert nvml.remapped_rows(2).failure


def test_recovery_action_field(sim: SimulatedNvml, nvml: PynvmlNvml) -> None:
    assert nvml.recovery_action(3) == RecoveryAction.NONE
    sim.set_recovery_action(3, pynvml.NVML_GPU_RECOVERY_ACTION_DRAIN_P2P)
    assert nvml.recovery_action(3) == RecoveryAction.DRAIN_P2P


def test_lost_gpu_raises_gpu_lost_on_every_read(sim: SimulatedNvml, nvml: PynvmlNvml) -> None:
    nvml.identity(1)  # the handle is cached before the GPU falls off
    sim.set_gpu_lost(1)
    reads = [
        nvml.identity,
        nvml.fabric_info,
        nvml.platform_info,
        nvml.nvlink_states,
        nvml.ecc_errors,
        nvml.remapped_rows,
        nvml.recovery_action,
    ]
    for read in reads:
        with pytest.raises(GpuLostError) as raised:
            read(1)
        assert raised.value.gpus == (1,)
    assert nvml.is_lost(1)
    assert not nvml.is_lost(0)
    assert nvml.device_count() == len(sim.node.gpus)

    sim.set_gpu_lost(1, lost=False)
    assert not nvml.is_lost(1)
    assert nvml.identity(1).uuid == sim.node.gpus[1].uuid


def test_gpu_lost_before_its_first_handle(sim: SimulatedNvml, nvml: PynvmlNvml) -> None:
    sim.set_gpu_lost(2)
    with pytest.raises(GpuLostError):
        nvml.fabric_info(2)
    assert nvml.is_lost(2)


def test_init_fails_cleanly_while_nvml_is_unavailable(sim: SimulatedNvml) -> None:
    sim.set_unavailable(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    with bind(sim):
        interface = PynvmlNvml()
        with pytest.raises(NvmlUnavailableError) as raised:
            interface.init()
        assert raised.value.code == pynvml.NVML_ERROR_DRIVER_NOT_LOADED
        interface.shutdown()  # nothing to release: no error
        sim.set_available()
        interface.init()
        assert interface.device_count() == len(sim.node.gpus)
        interface.shutdown()
    assert not sim.initialized


@pytest.mark.parametrize(
    "code", [pynvml.NVML_ERROR_DRIVER_NOT_LOADED, pynvml.NVML_ERROR_LIBRARY_NOT_FOUND]
)
def test_reads_fail_as_unavailable_when_nvml_goes_away(
    sim: SimulatedNvml, nvml: PynvmlNvml, code: int
) -> None:
    sim.set_unavailable(code)
    for read in (nvml.device_count, lambda: nvml.fabric_info(0), lambda: nvml.is_lost(0)):
        with pytest.raises(NvmlUnavailableError):
            read()
    sim.set_available()
    assert nvml.fabric_info(0).registered


def test_probe_reports_a_machine_without_nvml() -> None:
    # Runs the real library lookup: on a GPU machine it prints the GPUs instead.
    result = subprocess.run(
        [sys.executable, "-m", "shared.nvml.probe", "--events-s", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if result.returncode == 0:
        assert "GPUs" in result.stdout
    else:
        assert result.returncode == 2, result.stderr
        assert "NVML unavailable" in result.stderr
