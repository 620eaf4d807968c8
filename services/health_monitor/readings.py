"""One pass over a node's NVML health readings: the thin, blocking I/O shell.

:func:`read_node` asks the Nvml interface for everything the monitor polls and returns plain
Structs; turning them into signals is pure (``derive``). Run it with ``asyncio.to_thread``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import msgspec

from shared.nvml import (
    EccErrorCounts,
    FabricInfo,
    GpuLostError,
    NotSupportedError,
    NvLinkStates,
    Nvml,
    NvmlCallError,
    NvmlUnavailableError,
    RemappedRows,
)

T = TypeVar("T")


class GpuReading(msgspec.Struct, frozen=True, kw_only=True):
    """What one GPU reported; None for a reading the GPU does not offer or that failed."""

    index: int
    lost: bool = False
    fabric: FabricInfo | None = None
    nvlinks: NvLinkStates | None = None
    ecc: EccErrorCounts | None = None
    remapped_rows: RemappedRows | None = None
    recovery_action: int | None = None
    errors: tuple[str, ...] = ()  # readings that failed for another reason, for the log


class NodeReading(msgspec.Struct, frozen=True, kw_only=True):
    gpus: tuple[GpuReading, ...] = ()
    unavailable: str | None = None  # why NVML could not be read at all


class _Reader:
    """Collects one GPU's readings, keeping the failures of single reads as text."""

    def __init__(self, gpu: int) -> None:
        self.gpu = gpu
        self.errors: list[str] = []

    def read(self, what: Callable[[int], T]) -> T | None:
        try:
            return what(self.gpu)
        except NotSupportedError:
            return None
        except NvmlCallError as error:
            # One odd reading must not hide the others; the failure travels with the result.
            self.errors.append(str(error))
            return None


def read_gpu(nvml: Nvml, gpu: int) -> GpuReading:
    """Every polled reading of one GPU; a lost GPU yields ``lost=True`` and nothing else."""
    reader = _Reader(gpu)
    try:
        fabric = reader.read(nvml.fabric_info)
        nvlinks = reader.read(nvml.nvlink_states)
        ecc = reader.read(nvml.ecc_errors)
        remapped_rows = reader.read(nvml.remapped_rows)
        recovery_action = reader.read(nvml.recovery_action)
    except GpuLostError:
        return GpuReading(index=gpu, lost=True)
    return GpuReading(
        index=gpu,
        fabric=fabric,
        nvlinks=nvlinks,
        ecc=ecc,
        remapped_rows=remapped_rows,
        recovery_action=recovery_action,
        errors=tuple(reader.errors),
    )


def read_node(nvml: Nvml) -> NodeReading:
    """Every GPU of the node; ``unavailable`` says why when NVML cannot be read."""
    try:
        count = nvml.device_count()
        return NodeReading(gpus=tuple(read_gpu(nvml, gpu) for gpu in range(count)))
    except NvmlUnavailableError as error:
        return NodeReading(unavailable=str(error))
