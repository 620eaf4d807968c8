"""Every non-XID row of the classification table, reached through the signal that selects it."""

from __future__ import annotations

import pytest

from services.health_monitor import DEFAULT_RULES, Action, Severity, classify, rule_key, worst
from services.health_monitor.classification import SIGNAL_RULES
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
from shared.nvml import FabricHealthSummary as Summary
from shared.nvml import FabricState, RecoveryAction

OK, WARNING, FATAL = Severity.OK, Severity.WARNING, Severity.FATAL


Case = tuple[Signal, str, Severity, Action]


def case(signal: Signal, rule: str, severity: Severity, action: Action) -> Case:
    return (signal, rule, severity, action)


CASES: list[Case] = [
    # Fabric state and status.
    case(
        FabricNotReady(gpu=0, state=FabricState.NOT_SUPPORTED),
        "fabric.state.not_supported",
        OK,
        Action.NONE,
    ),
    case(
        FabricNotReady(gpu=0, state=FabricState.NOT_STARTED),
        "fabric.state.not_started",
        WARNING,
        Action.NONE,
    ),
    case(
        FabricNotReady(gpu=0, state=FabricState.IN_PROGRESS),
        "fabric.state.in_progress",
        WARNING,
        Action.NONE,
    ),
    case(
        FabricNotReady(gpu=0, state=FabricState.COMPLETED),
        "fabric.state.completed",
        OK,
        Action.NONE,
    ),
    case(FabricNotReady(gpu=0, state=42), "fabric.state.unknown", WARNING, Action.NONE),
    case(
        FabricRegistrationFailed(gpu=0, status=999),
        "fabric.registration_failed",
        FATAL,
        Action.RESET_GPU,
    ),
    # Every fabric health mask sub-field.
    case(
        FabricHealthFault(gpu=0, condition=FabricCondition.DEGRADED_BW, value=1),
        "fabric.health.degraded_bw",
        WARNING,
        Action.DRAIN_NODE,
    ),
    case(
        FabricHealthFault(gpu=0, condition=FabricCondition.ROUTE_RECOVERY, value=1),
        "fabric.health.route_recovery",
        WARNING,
        Action.NONE,
    ),
    case(
        FabricHealthFault(gpu=0, condition=FabricCondition.ROUTE_UNHEALTHY, value=1),
        "fabric.health.route_unhealthy",
        FATAL,
        Action.RESET_GPU,
    ),
    case(
        FabricHealthFault(gpu=0, condition=FabricCondition.ACCESS_TIMEOUT_RECOVERY, value=1),
        "fabric.health.access_timeout_recovery",
        WARNING,
        Action.NONE,
    ),
    case(
        FabricHealthFault(gpu=0, condition=FabricCondition.INCORRECT_CONFIGURATION, value=4),
        "fabric.health.incorrect_configuration",
        FATAL,
        Action.DRAIN_NODE,
    ),
    case(
        FabricHealthFault(gpu=0, condition=FabricCondition.PARTITION_UNASSIGNED, value=2),
        "fabric.health.partition_unassigned",
        WARNING,
        Action.DRAIN_NODE,
    ),
    case(
        FabricHealthFault(gpu=0, condition=FabricCondition.GFM_DISCONNECTED, value=2),
        "fabric.health.gfm_disconnected",
        WARNING,
        Action.NONE,
    ),
    # Fabric health summary.
    case(
        FabricHealthSummary(gpu=0, summary=Summary.NOT_SUPPORTED),
        "fabric.summary.not_supported",
        OK,
        Action.NONE,
    ),
    case(
        FabricHealthSummary(gpu=0, summary=Summary.HEALTHY),
        "fabric.summary.healthy",
        OK,
        Action.NONE,
    ),
    case(
        FabricHealthSummary(gpu=0, summary=Summary.UNHEALTHY),
        "fabric.summary.unhealthy",
        FATAL,
        Action.RESET_GPU,
    ),
    case(
        FabricHealthSummary(gpu=0, summary=Summary.LIMITED_CAPACITY),
        "fabric.summary.limited_capacity",
        WARNING,
        Action.DRAIN_NODE,
    ),
    case(FabricHealthSummary(gpu=0, summary=7), "fabric.summary.unknown", WARNING, Action.NONE),
    case(
        CliqueDisagreement(cliques=("a.1", "b.1")),
        "fabric.clique_disagreement",
        WARNING,
        Action.NONE,
    ),
    # NVLinks.
    case(NvLinkDown(gpu=0, links=(), total=18), "nvlink.up", OK, Action.NONE),
    case(NvLinkDown(gpu=0, links=(3,), total=18), "nvlink.down", WARNING, Action.RESET_GPU),
    case(
        NvLinkDown(gpu=0, links=tuple(range(18)), total=18),
        "nvlink.all_down",
        FATAL,
        Action.RESET_GPU,
    ),
    # Memory.
    case(EccUncorrected(gpu=0, increase=0, total=4), "ecc.unchanged", OK, Action.NONE),
    case(EccUncorrected(gpu=0, increase=2, total=6), "ecc.uncorrected", WARNING, Action.RESET_GPU),
    case(RowRemapPending(gpu=0), "remapped_rows.pending", WARNING, Action.RESET_GPU),
    case(RowRemapFailure(gpu=0), "remapped_rows.failure", FATAL, Action.DRAIN_NODE),
    # The GPU, the recovery action field, the library.
    case(GpuLost(gpu=0), "gpu.lost", FATAL, Action.DRAIN_NODE),
    case(
        RecoveryActionRequired(gpu=0, action=RecoveryAction.NONE),
        "recovery_action.none",
        OK,
        Action.NONE,
    ),
    case(
        RecoveryActionRequired(gpu=0, action=RecoveryAction.GPU_RESET),
        "recovery_action.gpu_reset",
        FATAL,
        Action.RESET_GPU,
    ),
    case(
        RecoveryActionRequired(gpu=0, action=RecoveryAction.NODE_REBOOT),
        "recovery_action.node_reboot",
        FATAL,
        Action.DRAIN_NODE,
    ),
    (
        RecoveryActionRequired(gpu=0, action=RecoveryAction.DRAIN_P2P),
        "recovery_action.drain_p2p",
        FATAL,
        Action.DRAIN_NODE,
    ),
    case(
        RecoveryActionRequired(gpu=0, action=RecoveryAction.DRAIN_AND_RESET),
        "recovery_action.drain_and_reset",
        FATAL,
        Action.RESET_GPU,
    ),
    case(
        RecoveryActionRequired(gpu=0, action=RecoveryAction.RECOVER_IMEX_DOMAIN),
        "recovery_action.recover_imex_domain",
        FATAL,
        Action.RECOVER_IMEX_DOMAIN,
    ),
    case(
        RecoveryActionRequired(gpu=0, action=RecoveryAction.BUS_RESET),
        "recovery_action.bus_reset",
        FATAL,
        Action.RESET_GPU,
    ),
    case(
        RecoveryActionRequired(gpu=0, action=RecoveryAction.SYSTEM_REBOOT),
        "recovery_action.system_reboot",
        FATAL,
        Action.DRAIN_NODE,
    ),
    case(RecoveryActionRequired(gpu=0, action=99), "recovery_action.unknown", WARNING, Action.NONE),
    case(
        NvmlUnavailable(reason="driver not loaded"), "nvml.unavailable", WARNING, Action.DRAIN_NODE
    ),
]


@pytest.mark.parametrize(
    ("signal", "rule", "severity", "action"), CASES, ids=[rule for _, rule, _, _ in CASES]
)
def test_signal_classification(
    signal: Signal, rule: str, severity: Severity, action: Action
) -> None:
    verdict = classify(signal)
    assert (verdict.rule, verdict.severity, verdict.action) == (rule, severity, action)
    assert verdict.summary == DEFAULT_RULES[rule].summary
    assert not verdict.ignored


def test_every_signal_rule_is_reached_by_some_case() -> None:
    assert {rule for _, rule, _, _ in CASES} == set(SIGNAL_RULES)


def test_table_holds_signal_rows_and_xid_rows_only() -> None:
    for key in DEFAULT_RULES:
        assert key in SIGNAL_RULES or key.startswith("xid."), key


def test_rule_key_of_an_xid_is_its_number() -> None:
    assert rule_key(XidError(xid=79)) == "xid.79"


def test_worst_takes_the_highest_severity_and_skips_ignored() -> None:
    verdicts = [classify(XidError(xid=13)), classify(RowRemapPending(gpu=0))]
    assert worst(verdicts) is WARNING
    assert worst([*verdicts, classify(GpuLost(gpu=1))]) is FATAL
    assert worst([]) is OK
