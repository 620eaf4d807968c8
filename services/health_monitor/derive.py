"""Signals from readings and events: pure functions, no NVML calls.

A healthy GPU yields no signal. Counters are compared with the previous reading: the first
reading after the monitor starts is the baseline, so errors counted before it are not
reported again on every restart.
"""

from __future__ import annotations

from services.health_monitor.readings import GpuReading, NodeReading
from services.health_monitor.signals import (
    CliqueDisagreement,
    EccUncorrected,
    FabricCondition,
    FabricHealthFault,
    FabricHealthSummary,
    FabricNotReady,
    FabricRegistrationFailed,
    GpuLost,
    NvLinkDown,
    NvmlUnavailable,
    RecoveryActionRequired,
    RowRemapFailure,
    RowRemapPending,
    Signal,
    XidError,
)
from shared.nvml import (
    NVML_SUCCESS,
    CliqueStatus,
    DeviceEvent,
    EventKind,
    FabricInfo,
    FabricState,
    HealthField,
    RecoveryAction,
    health_faults,
    node_clique,
)
from shared.nvml import FabricHealthSummary as Summary

_CONDITIONS = {
    HealthField.DEGRADED_BW: FabricCondition.DEGRADED_BW,
    HealthField.ROUTE_RECOVERY: FabricCondition.ROUTE_RECOVERY,
    HealthField.ROUTE_UNHEALTHY: FabricCondition.ROUTE_UNHEALTHY,
    HealthField.ACCESS_TIMEOUT_RECOVERY: FabricCondition.ACCESS_TIMEOUT_RECOVERY,
    HealthField.INCORRECT_CONFIGURATION: FabricCondition.INCORRECT_CONFIGURATION,
    HealthField.PARTITION_ASSIGNED: FabricCondition.PARTITION_UNASSIGNED,
    HealthField.GFM_STATE: FabricCondition.GFM_DISCONNECTED,
}
_UNHEALTHY_SUMMARIES = frozenset({Summary.UNHEALTHY, Summary.LIMITED_CAPACITY})


def fabric_signals(info: FabricInfo) -> list[Signal]:
    gpu = info.gpu_index
    if info.state == FabricState.NOT_SUPPORTED:
        return []  # not on an NVLink fabric: nothing to watch
    if info.state != FabricState.COMPLETED:
        return [FabricNotReady(gpu=gpu, state=info.state)]
    signals: list[Signal] = []
    if info.status != NVML_SUCCESS:
        signals.append(FabricRegistrationFailed(gpu=gpu, status=info.status))
    signals.extend(
        FabricHealthFault(gpu=gpu, condition=_CONDITIONS[fault.field], value=fault.value)
        for fault in health_faults(info.health_mask)
    )
    if info.health_summary in _UNHEALTHY_SUMMARIES:
        signals.append(FabricHealthSummary(gpu=gpu, summary=info.health_summary))
    return signals


def gpu_signals(current: GpuReading, *, previous: GpuReading | None = None) -> list[Signal]:
    gpu = current.index
    if current.lost:
        return [GpuLost(gpu=gpu)]
    signals: list[Signal] = []
    if current.fabric is not None:
        signals.extend(fabric_signals(current.fabric))
    if current.nvlinks is not None and current.nvlinks.down:
        signals.append(
            NvLinkDown(gpu=gpu, links=current.nvlinks.down, total=len(current.nvlinks.active))
        )
    before = previous.ecc if previous is not None else None
    if current.ecc is not None and before is not None:
        increase = current.ecc.uncorrected_volatile - before.uncorrected_volatile
        if increase > 0:
            signals.append(
                EccUncorrected(gpu=gpu, increase=increase, total=current.ecc.uncorrected_volatile)
            )
    if current.remapped_rows is not None:
        if current.remapped_rows.pending:
            signals.append(RowRemapPending(gpu=gpu))
        if current.remapped_rows.failure:
            signals.append(RowRemapFailure(gpu=gpu))
    if current.recovery_action not in (None, RecoveryAction.NONE):
        signals.append(RecoveryActionRequired(gpu=gpu, action=current.recovery_action))
    return signals


def node_signals(current: NodeReading, *, previous: NodeReading | None = None) -> list[Signal]:
    """Every signal a node reading shows; ``previous`` is the reading before, if any."""
    if current.unavailable is not None:
        return [NvmlUnavailable(reason=current.unavailable)]
    before = {gpu.index: gpu for gpu in previous.gpus} if previous is not None else {}
    signals: list[Signal] = []
    for gpu in current.gpus:
        signals.extend(gpu_signals(gpu, previous=before.get(gpu.index)))
    clique = node_clique([gpu.fabric for gpu in current.gpus if gpu.fabric is not None])
    if clique.status is CliqueStatus.DISAGREE:
        signals.append(CliqueDisagreement(cliques=tuple(group.clique for group in clique.groups)))
    return signals


def event_signal(event: DeviceEvent) -> Signal | None:
    """The signal an NVML event carries by itself, if any.

    ECC events carry no count (the next reading shows the rise), so they yield none.
    """
    if event.kind is EventKind.XID:
        return XidError(gpu=event.gpu_index, xid=event.data)
    if event.kind is EventKind.RECOVERY_ACTION:
        return RecoveryActionRequired(gpu=event.gpu_index, action=event.data)
    return None
