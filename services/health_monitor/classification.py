"""Classify health signals by table: each signal maps to one rule key, each key to a rule.

The table is data (``DEFAULT_RULES``): ``xid.<n>`` rows come from NVIDIA's XID catalog
(``xid_catalog``), the others are below. :func:`rule_key` is the only logic: it names the
row a signal falls in. Operators replace rows by configuration (``overrides``); the result
is a :class:`Classifier`, whose :meth:`~Classifier.classify` is a pure lookup. The table and
its sources are documented in docs/health-classification.md.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

from services.health_monitor.rules import Action, Rule, Severity, Verdict
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
from services.health_monitor.xid_catalog import xid_rules
from shared.nvml import FabricHealthSummary as Summary
from shared.nvml import FabricState, RecoveryAction


def _rule(severity: Severity, action: Action, summary: str) -> Rule:
    return Rule(severity=severity, action=action, summary=summary)


OK, WARNING, FATAL = Severity.OK, Severity.WARNING, Severity.FATAL

SIGNAL_RULES: dict[str, Rule] = {
    # Fabric registration (nvmlGpuFabricInfo state / status).
    "fabric.state.not_supported": _rule(OK, Action.NONE, "GPU is not on an NVLink fabric"),
    "fabric.state.not_started": _rule(WARNING, Action.NONE, "fabric registration has not started"),
    "fabric.state.in_progress": _rule(WARNING, Action.NONE, "fabric registration in progress"),
    "fabric.state.completed": _rule(OK, Action.NONE, "fabric registration completed"),
    "fabric.state.unknown": _rule(WARNING, Action.NONE, "fabric state NVML does not define"),
    "fabric.registration_failed": _rule(
        FATAL, Action.RESET_GPU, "fabric registration completed with an error"
    ),
    # Fabric health mask sub-fields.
    "fabric.health.degraded_bw": _rule(
        WARNING, Action.DRAIN_NODE, "NVLink bandwidth of the GPU is degraded"
    ),
    "fabric.health.route_recovery": _rule(
        WARNING, Action.NONE, "fabric route recovery in progress"
    ),
    "fabric.health.route_unhealthy": _rule(
        FATAL, Action.RESET_GPU, "fabric routes of the GPU are unhealthy"
    ),
    "fabric.health.access_timeout_recovery": _rule(
        WARNING, Action.NONE, "fabric access timeout recovery in progress"
    ),
    "fabric.health.incorrect_configuration": _rule(
        FATAL, Action.DRAIN_NODE, "fabric configuration of the GPU is incorrect"
    ),
    "fabric.health.partition_unassigned": _rule(
        WARNING, Action.DRAIN_NODE, "GPU is not assigned to a fabric partition"
    ),
    "fabric.health.gfm_disconnected": _rule(
        WARNING, Action.NONE, "global fabric manager is disconnected"
    ),
    # Fabric health summary (v3 struct).
    "fabric.summary.not_supported": _rule(OK, Action.NONE, "fabric health summary not reported"),
    "fabric.summary.healthy": _rule(OK, Action.NONE, "fabric health summary healthy"),
    "fabric.summary.unhealthy": _rule(FATAL, Action.RESET_GPU, "fabric health summary unhealthy"),
    "fabric.summary.limited_capacity": _rule(
        WARNING, Action.DRAIN_NODE, "fabric health summary: limited capacity"
    ),
    "fabric.summary.unknown": _rule(WARNING, Action.NONE, "fabric summary NVML does not define"),
    "fabric.clique_disagreement": _rule(
        WARNING, Action.NONE, "GPUs of the node report different NVLink cliques"
    ),
    # NVLinks.
    "nvlink.up": _rule(OK, Action.NONE, "every NVLink is up"),
    "nvlink.down": _rule(WARNING, Action.RESET_GPU, "some NVLinks of the GPU are down"),
    "nvlink.all_down": _rule(FATAL, Action.RESET_GPU, "every NVLink of the GPU is down"),
    # Memory.
    "ecc.unchanged": _rule(OK, Action.NONE, "uncorrected ECC count unchanged"),
    "ecc.uncorrected": _rule(
        WARNING, Action.RESET_GPU, "uncorrected ECC errors rose; a reset applies row remapping"
    ),
    "remapped_rows.pending": _rule(
        WARNING, Action.RESET_GPU, "row remapping waits for the next GPU reset"
    ),
    "remapped_rows.failure": _rule(FATAL, Action.DRAIN_NODE, "row remapping failed"),
    # The GPU itself.
    "gpu.lost": _rule(FATAL, Action.DRAIN_NODE, "GPU has fallen off the bus"),
    # NVML's recovery action field.
    "recovery_action.none": _rule(OK, Action.NONE, "no recovery action needed"),
    "recovery_action.gpu_reset": _rule(FATAL, Action.RESET_GPU, "NVML asks for a GPU reset"),
    "recovery_action.node_reboot": _rule(FATAL, Action.DRAIN_NODE, "NVML asks for a node reboot"),
    "recovery_action.drain_p2p": _rule(
        FATAL, Action.DRAIN_NODE, "NVML asks to stop all peer-to-peer traffic of the GPU"
    ),
    "recovery_action.drain_and_reset": _rule(
        FATAL, Action.RESET_GPU, "NVML asks to drain peer-to-peer traffic and reset the GPU"
    ),
    "recovery_action.recover_imex_domain": _rule(
        FATAL, Action.RECOVER_IMEX_DOMAIN, "NVML asks to recover the IMEX domain"
    ),
    "recovery_action.bus_reset": _rule(
        FATAL, Action.RESET_GPU, "NVML asks for a reset of the GPU's PCIe bus"
    ),
    "recovery_action.system_reboot": _rule(
        FATAL, Action.DRAIN_NODE, "NVML asks for a system reboot"
    ),
    "recovery_action.unknown": _rule(
        WARNING, Action.NONE, "recovery action this build does not know"
    ),
    # The library.
    "nvml.unavailable": _rule(
        WARNING, Action.DRAIN_NODE, "NVML cannot be read: GPU health is unknown"
    ),
}

DEFAULT_RULES: Mapping[str, Rule] = MappingProxyType({**xid_rules(), **SIGNAL_RULES})


def _enum_key(prefix: str, enum_type: type[enum.IntEnum], value: int) -> str:
    try:
        return f"{prefix}.{enum_type(value).name.lower()}"
    except ValueError:
        return f"{prefix}.unknown"


def rule_key(signal: Signal) -> str:
    """The table row a signal falls in (before the xid.default fallback)."""
    match signal:
        case XidError(xid=xid):
            return f"xid.{xid}"
        case FabricNotReady(state=state):
            return _enum_key("fabric.state", FabricState, state)
        case FabricRegistrationFailed():
            return "fabric.registration_failed"
        case FabricHealthFault(condition=condition):
            return f"fabric.health.{FabricCondition(condition).value}"
        case FabricHealthSummary(summary=summary):
            return _enum_key("fabric.summary", Summary, summary)
        case NvLinkDown(links=links, total=total):
            if not links:
                return "nvlink.up"
            return "nvlink.all_down" if len(links) >= total else "nvlink.down"
        case EccUncorrected(increase=increase):
            return "ecc.uncorrected" if increase > 0 else "ecc.unchanged"
        case RowRemapPending():
            return "remapped_rows.pending"
        case RowRemapFailure():
            return "remapped_rows.failure"
        case GpuLost():
            return "gpu.lost"
        case RecoveryActionRequired(action=action):
            return _enum_key("recovery_action", RecoveryAction, action)
        case CliqueDisagreement():
            return "fabric.clique_disagreement"
        case NvmlUnavailable():
            return "nvml.unavailable"


class Classifier:
    """The classification table in effect: the defaults with operator overrides applied."""

    __slots__ = ("_rules",)

    def __init__(self, rules: Mapping[str, Rule] = DEFAULT_RULES) -> None:
        self._rules = MappingProxyType(dict(rules))

    @property
    def rules(self) -> Mapping[str, Rule]:
        return self._rules

    def classify(self, signal: Signal) -> Verdict:
        key = rule_key(signal)
        rule = self._rules.get(key)
        if rule is None:
            # Only XIDs fall outside the table: numbers the catalog does not list.
            key = "xid.default"
            rule = self._rules[key]
        return Verdict(
            rule=key,
            severity=Severity.OK if rule.ignored else rule.severity,
            action=Action.NONE if rule.ignored else rule.action,
            summary=rule.summary,
            ignored=rule.ignored,
        )


DEFAULT_CLASSIFIER = Classifier()


def classify(signal: Signal) -> Verdict:
    """Classify with the default table (no overrides)."""
    return DEFAULT_CLASSIFIER.classify(signal)
