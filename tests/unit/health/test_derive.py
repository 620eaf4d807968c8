"""From readings to signals (pure), and on to verdicts."""

from __future__ import annotations

import uuid

from services.health_monitor import (
    GpuReading,
    NodeReading,
    Severity,
    classify,
    event_signal,
    node_signals,
    worst,
)
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
    XidError,
)
from shared.nvml import (
    DeviceEvent,
    EccErrorCounts,
    EventKind,
    FabricInfo,
    FabricState,
    HealthField,
    NvLinkStates,
    RecoveryAction,
    RemappedRows,
)
from shared.nvml import FabricHealthSummary as Summary
from shared.nvml.fabric import FALSE, TRUE, GfmState, IncorrectConfiguration

RACK = uuid.UUID("11111111-1111-4111-8111-111111111111")


def mask(**values: int) -> int:
    """A health mask: every named field set, the rest at their healthy value."""
    healthy = {
        HealthField.DEGRADED_BW: FALSE,
        HealthField.ROUTE_RECOVERY: FALSE,
        HealthField.ROUTE_UNHEALTHY: FALSE,
        HealthField.ACCESS_TIMEOUT_RECOVERY: FALSE,
        HealthField.INCORRECT_CONFIGURATION: IncorrectConfiguration.NONE,
        HealthField.PARTITION_ASSIGNED: TRUE,
        HealthField.GFM_STATE: GfmState.CONNECTED,
    }
    healthy.update({HealthField[name.upper()]: value for name, value in values.items()})
    result = 0
    for field, value in healthy.items():
        result |= value << field.shift
    return result


def fabric(gpu: int, **changes: object) -> FabricInfo:
    values: dict[str, object] = {
        "gpu_index": gpu,
        "version": 3,
        "state": FabricState.COMPLETED,
        "status": 0,
        "cluster_uuid": RACK,
        "clique_id": 1,
        "health_mask": mask(),
        "health_summary": Summary.HEALTHY,
    }
    values.update(changes)
    return FabricInfo(**values)  # type: ignore[arg-type]


def gpu(index: int, **changes: object) -> GpuReading:
    values: dict[str, object] = {
        "index": index,
        "fabric": fabric(index),
        "nvlinks": NvLinkStates(gpu_index=index, active=(True,) * 18),
        "ecc": EccErrorCounts(gpu_index=index, uncorrected_volatile=0, uncorrected_aggregate=0),
        "remapped_rows": RemappedRows(
            gpu_index=index, correctable=0, uncorrectable=0, pending=False, failure=False
        ),
        "recovery_action": RecoveryAction.NONE,
    }
    values.update(changes)
    return GpuReading(**values)  # type: ignore[arg-type]


def node(*gpus: GpuReading) -> NodeReading:
    return NodeReading(gpus=gpus or tuple(gpu(index) for index in range(4)))


def test_a_healthy_node_has_no_signal() -> None:
    assert node_signals(node(), previous=node()) == []


def test_every_fabric_health_fault_becomes_a_signal() -> None:
    reading = gpu(
        0,
        fabric=fabric(
            0,
            health_mask=mask(
                degraded_bw=TRUE,
                route_recovery=TRUE,
                route_unhealthy=TRUE,
                access_timeout_recovery=TRUE,
                incorrect_configuration=IncorrectConfiguration.INSUFFICIENT_NVLINKS,
                partition_assigned=FALSE,
                gfm_state=GfmState.DISCONNECTED,
            ),
            health_summary=Summary.UNHEALTHY,
        ),
    )
    signals = node_signals(node(reading))
    assert signals == [
        FabricHealthFault(gpu=0, condition=FabricCondition.DEGRADED_BW, value=TRUE),
        FabricHealthFault(gpu=0, condition=FabricCondition.ROUTE_RECOVERY, value=TRUE),
        FabricHealthFault(gpu=0, condition=FabricCondition.ROUTE_UNHEALTHY, value=TRUE),
        FabricHealthFault(gpu=0, condition=FabricCondition.ACCESS_TIMEOUT_RECOVERY, value=TRUE),
        FabricHealthFault(
            gpu=0,
            condition=FabricCondition.INCORRECT_CONFIGURATION,
            value=IncorrectConfiguration.INSUFFICIENT_NVLINKS,
        ),
        FabricHealthFault(gpu=0, condition=FabricCondition.PARTITION_UNASSIGNED, value=FALSE),
        FabricHealthFault(
            gpu=0, condition=FabricCondition.GFM_DISCONNECTED, value=GfmState.DISCONNECTED
        ),
        FabricHealthSummary(gpu=0, summary=Summary.UNHEALTHY),
    ]
    assert worst(classify(signal) for signal in signals) is Severity.FATAL


def test_sub_fields_the_driver_does_not_report_are_not_faults() -> None:
    assert node_signals(node(gpu(0, fabric=fabric(0, health_mask=0, health_summary=None)))) == []


def test_fabric_registration() -> None:
    pending = gpu(0, fabric=fabric(0, state=FabricState.IN_PROGRESS))
    failed = gpu(1, fabric=fabric(1, status=999))
    absent = gpu(2, fabric=fabric(2, state=FabricState.NOT_SUPPORTED))
    assert node_signals(node(pending, failed, absent)) == [
        FabricNotReady(gpu=0, state=FabricState.IN_PROGRESS),
        FabricRegistrationFailed(gpu=1, status=999),
    ]


def test_gpus_in_different_cliques() -> None:
    other = uuid.UUID("22222222-2222-4222-8222-222222222222")
    signals = node_signals(node(gpu(0), gpu(1, fabric=fabric(1, cluster_uuid=other))))
    assert signals == [CliqueDisagreement(cliques=(f"{RACK}.1", f"{other}.1"))]
    assert classify(signals[0]).severity is Severity.WARNING


def test_links_memory_recovery_and_loss() -> None:
    links = (True,) * 5 + (False,) + (True,) * 12
    current = node(
        gpu(0, nvlinks=NvLinkStates(gpu_index=0, active=links)),
        gpu(
            1,
            remapped_rows=RemappedRows(
                gpu_index=1, correctable=0, uncorrectable=1, pending=True, failure=True
            ),
        ),
        gpu(2, recovery_action=RecoveryAction.DRAIN_AND_RESET),
        GpuReading(index=3, lost=True),
    )
    assert node_signals(current) == [
        NvLinkDown(gpu=0, links=(5,), total=18),
        RowRemapPending(gpu=1),
        RowRemapFailure(gpu=1),
        RecoveryActionRequired(gpu=2, action=RecoveryAction.DRAIN_AND_RESET),
        GpuLost(gpu=3),
    ]


def test_ecc_increase_is_measured_against_the_previous_reading() -> None:
    def with_ecc(count: int) -> NodeReading:
        return node(
            gpu(
                0,
                ecc=EccErrorCounts(
                    gpu_index=0, uncorrected_volatile=count, uncorrected_aggregate=count
                ),
            )
        )

    # The first reading is the baseline: counts from before the monitor started are old news.
    assert node_signals(with_ecc(3)) == []
    assert node_signals(with_ecc(3), previous=with_ecc(3)) == []
    assert node_signals(with_ecc(5), previous=with_ecc(3)) == [
        EccUncorrected(gpu=0, increase=2, total=5)
    ]


def test_unavailable_nvml_is_one_node_signal() -> None:
    signals = node_signals(NodeReading(unavailable="driver not loaded"), previous=node())
    assert signals == [NvmlUnavailable(reason="driver not loaded")]


def test_events_to_signals() -> None:
    def event(kind: EventKind, data: int) -> DeviceEvent:
        return DeviceEvent(gpu_index=2, kind=kind, event_type=0, data=data)

    assert event_signal(event(EventKind.XID, 79)) == XidError(gpu=2, xid=79)
    assert event_signal(event(EventKind.RECOVERY_ACTION, 1)) == RecoveryActionRequired(
        gpu=2, action=1
    )
    assert event_signal(event(EventKind.DOUBLE_BIT_ECC, 0)) is None
