"""Faults a hosted node's simulated NVML can be given, as the control API receives them.

Each request is a tagged msgspec Struct (``{"kind": "xid", "gpu": 1, "xid": 79}``), applied to
the node's :class:`sim.nvml.SimulatedNvml` by :func:`inject`. The services see the result only
through pynvml, as they would see a real fault.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
import pynvml
from msgspec import Meta

from sim.nvml import HealthField, SimulatedNvml

Gpu = Annotated[int, Meta(ge=0, description="GPU index on the node.")]

FabricState = Literal["not_supported", "not_started", "in_progress", "completed"]
FabricProblem = Literal[
    "degraded_bandwidth", "route_recovery", "route_unhealthy", "access_timeout_recovery"
]

_FABRIC_STATES: dict[str, int] = {
    "not_supported": pynvml.NVML_GPU_FABRIC_STATE_NOT_SUPPORTED,
    "not_started": pynvml.NVML_GPU_FABRIC_STATE_NOT_STARTED,
    "in_progress": pynvml.NVML_GPU_FABRIC_STATE_IN_PROGRESS,
    "completed": pynvml.NVML_GPU_FABRIC_STATE_COMPLETED,
}
_FABRIC_PROBLEMS: dict[str, tuple[HealthField, int]] = {
    "degraded_bandwidth": (
        HealthField.DEGRADED_BW,
        pynvml.NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE,
    ),
    "route_recovery": (
        HealthField.ROUTE_RECOVERY,
        pynvml.NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_RECOVERY_TRUE,
    ),
    "route_unhealthy": (
        HealthField.ROUTE_UNHEALTHY,
        pynvml.NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_TRUE,
    ),
    "access_timeout_recovery": (
        HealthField.ACCESS_TIMEOUT_RECOVERY,
        pynvml.NVML_GPU_FABRIC_HEALTH_MASK_ACCESS_TIMEOUT_RECOVERY_TRUE,
    ),
}


class XidFault(msgspec.Struct, frozen=True, kw_only=True, tag="xid", tag_field="kind"):
    """An XID event on one GPU (79: fallen off the bus, 48: double-bit ECC, 74: NVLink ...)."""

    gpu: Gpu = 0
    xid: Annotated[int, Meta(gt=0, lt=2**32)]


class GpuLostFault(msgspec.Struct, frozen=True, kw_only=True, tag="gpu_lost", tag_field="kind"):
    """A GPU falls off the bus (every NVML call on it fails with GPU_IS_LOST), or returns."""

    gpu: Gpu = 0
    lost: bool = True


class NvlinkFault(msgspec.Struct, frozen=True, kw_only=True, tag="nvlink", tag_field="kind"):
    """One NVLink of a GPU goes down (or comes back up)."""

    gpu: Gpu = 0
    link: Annotated[int, Meta(ge=0)] = 0
    up: bool = False


class FabricFault(msgspec.Struct, frozen=True, kw_only=True, tag="fabric", tag_field="kind"):
    """Fabric registration state and health problems of one GPU, or of every GPU (gpu null)."""

    gpu: Gpu | None = None
    state: FabricState | None = None
    problems: tuple[FabricProblem, ...] = ()


class ClearFaults(msgspec.Struct, frozen=True, kw_only=True, tag="clear", tag_field="kind"):
    """Every GPU of the node back to healthy (queued NVML events are still delivered)."""


Fault = XidFault | GpuLostFault | NvlinkFault | FabricFault | ClearFaults

FAULT_DECODER = msgspec.json.Decoder(Fault)


def inject(nvml: SimulatedNvml, fault: Fault) -> str:
    """Apply ``fault`` to the node; a short description of what changed.

    Raises IndexError for a GPU or link the node does not have.
    """
    match fault:
        case XidFault(gpu=gpu, xid=xid):
            nvml.raise_xid(gpu, xid)
            return f"XID {xid} on GPU {gpu}"
        case GpuLostFault(gpu=gpu, lost=lost):
            nvml.set_gpu_lost(gpu, lost)
            return f"GPU {gpu} {'lost' if lost else 'back on the bus'}"
        case NvlinkFault(gpu=gpu, link=link, up=up):
            nvml.set_nvlink_active(gpu, link, up)
            return f"NVLink {link} of GPU {gpu} {'up' if up else 'down'}"
        case FabricFault(gpu=gpu, state=state, problems=problems):
            if state is not None:
                nvml.set_fabric(gpu, state=_FABRIC_STATES[state])
            for problem in problems:
                field, value = _FABRIC_PROBLEMS[problem]
                nvml.set_fabric_health(gpu, field, value)
            where = "every GPU" if gpu is None else f"GPU {gpu}"
            changes = [f"state {state}"] if state is not None else []
            changes += list(problems)
            return f"fabric of {where}: {', '.join(changes) or 'unchanged'}"
        case ClearFaults():
            nvml.clear_faults()
            return "every GPU healthy"
