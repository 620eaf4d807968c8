"""Faults: classified signals that ask something of the node, and the reaction each asks for.

A :class:`Fault` is a signal whose verdict is ``warning`` or ``fatal`` (``ok`` and ignored
verdicts are only counted). Its ``key`` names the fault across readings, the rule plus the GPU,
so the same problem seen twice is one fault. Its :class:`Reaction` is what it asks of the
node: fatal faults evict (NoExecute), warnings whose recommended action needs the node keep new
work away (NoSchedule), other warnings are only reported.

XIDs and ECC rises are *transient* signals: NVML reports them once, so the monitor keeps them
active for a while (``xid_latch_s``). Every other signal is a state that the next reading
shows again for as long as it lasts.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

import msgspec

from services.health_monitor.rules import Action, Severity, Verdict
from services.health_monitor.signals import (
    CliqueDisagreement,
    EccUncorrected,
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
from shared.events.vocabulary import FaultSignal
from shared.nvml import FabricHealthSummary as Summary
from shared.nvml import FabricState, RecoveryAction

# Warnings with one of these recommended actions need the node, so new work goes elsewhere.
_NODE_ACTIONS = frozenset({Action.RESET_GPU, Action.DRAIN_NODE, Action.RECOVER_IMEX_DOMAIN})


class Reaction(enum.IntEnum):
    """What the node's taint says, weakest first."""

    NONE = 0
    NO_SCHEDULE = 1
    NO_EXECUTE = 2

    @property
    def effect(self) -> str | None:
        """The taint effect, None for no taint."""
        return _EFFECTS[self]


_EFFECTS = {
    Reaction.NONE: None,
    Reaction.NO_SCHEDULE: "NoSchedule",
    Reaction.NO_EXECUTE: "NoExecute",
}


class Fault(msgspec.Struct, frozen=True, kw_only=True):
    """One active problem of the node, as the events and the node condition report it."""

    key: str  # rule and GPU, e.g. "xid.79@gpu1"; the same problem seen again has the same key
    rule: str
    signal: str  # the signal family: xid, fabric, nvlink, ecc, remapped_rows, gpu_lost ...
    gpu: int | None
    code: int  # XID number or the signal's own value (fabric state, recovery action ...)
    severity: Severity
    action: Action
    message: str  # e.g. "GPU 1: XID 79: GPU has fallen off the bus"
    # Reacts on its GPU only (``scope.confine``): the Node's taint does not count it.
    confined: bool = False

    @property
    def reaction(self) -> Reaction:
        """What the fault asks of the Node's taint (nothing when it is confined to its GPU)."""
        return Reaction.NONE if self.confined else self.wanted

    @property
    def wanted(self) -> Reaction:
        """What the fault asks for wherever it reacts, its GPU or the node."""
        if self.severity is Severity.FATAL:
            return Reaction.NO_EXECUTE
        if self.severity is Severity.WARNING and self.action in _NODE_ACTIONS:
            return Reaction.NO_SCHEDULE
        return Reaction.NONE


def reaction_of(faults: Iterable[Fault]) -> Reaction:
    """The strongest reaction any of ``faults`` asks for."""
    return max((fault.reaction for fault in faults), default=Reaction.NONE)


def signal_family(signal: Signal) -> FaultSignal:
    """The coarse kind of a signal, as NodeFault.signal carries it."""
    match signal:
        case XidError():
            return FaultSignal.XID
        case (
            FabricNotReady()
            | FabricRegistrationFailed()
            | FabricHealthFault()
            | FabricHealthSummary()
        ):
            return FaultSignal.FABRIC
        case NvLinkDown():
            return FaultSignal.NVLINK
        case EccUncorrected():
            return FaultSignal.ECC
        case RowRemapPending() | RowRemapFailure():
            return FaultSignal.REMAPPED_ROWS
        case GpuLost():
            return FaultSignal.GPU_LOST
        case RecoveryActionRequired():
            return FaultSignal.RECOVERY_ACTION
        case CliqueDisagreement():
            return FaultSignal.CLIQUE
        case NvmlUnavailable():
            return FaultSignal.NVML


def signal_code(signal: Signal) -> int:
    """The number a signal carries, as NodeFault.code: the XID, a state or value, or 0."""
    match signal:
        case XidError(xid=xid):
            return xid
        case FabricNotReady(state=state):
            return state
        case FabricRegistrationFailed(status=status):
            return status
        case FabricHealthFault(value=value):
            return value
        case FabricHealthSummary(summary=summary):
            return summary
        case NvLinkDown(links=links):
            return len(links)
        case EccUncorrected(total=total):
            return total
        case RecoveryActionRequired(action=action):
            return action
        case _:
            return 0


def _name(enum_type: type[enum.IntEnum], value: int) -> str:
    try:
        return enum_type(value).name
    except ValueError:
        return str(value)


def signal_detail(signal: Signal) -> str:
    """What was observed, in a few words that stay the same while the fault lasts."""
    match signal:
        case XidError(xid=xid):
            return f"XID {xid}"
        case FabricNotReady(state=state):
            return f"fabric state {_name(FabricState, state)}"
        case FabricRegistrationFailed(status=status):
            return f"fabric registration status {status}"
        case FabricHealthFault(condition=condition, value=value):
            return f"fabric health {condition}={value}"
        case FabricHealthSummary(summary=summary):
            return f"fabric health summary {_name(Summary, summary)}"
        case NvLinkDown(links=links, total=total):
            return f"NVLinks {list(links)} of {total} down"
        case EccUncorrected(total=total):
            return f"uncorrected ECC errors rose to {total}"
        case RowRemapPending():
            return "row remap pending"
        case RowRemapFailure():
            return "row remap failed"
        case GpuLost():
            return "GPU lost"
        case RecoveryActionRequired(action=action):
            return f"recovery action {_name(RecoveryAction, action)}"
        case CliqueDisagreement(cliques=cliques):
            return f"cliques {', '.join(cliques)}"
        case NvmlUnavailable(reason=reason):
            return reason


def is_transient(signal: Signal) -> bool:
    """Whether NVML reports the signal once (an event, a counter rise) rather than as a state."""
    return isinstance(signal, XidError | EccUncorrected)


def fault_key(rule: str, gpu: int | None) -> str:
    return rule if gpu is None else f"{rule}@gpu{gpu}"


def fault_of(signal: Signal, verdict: Verdict) -> Fault | None:
    """The fault a classified signal is, or None when it asks nothing of the node."""
    if verdict.ignored or verdict.severity is Severity.OK:
        return None
    where = "node" if signal.gpu is None else f"GPU {signal.gpu}"
    detail = signal_detail(signal)
    # XID rows already start with "XID <n>:"; say it once.
    what = (
        verdict.summary
        if verdict.summary.startswith(f"{detail}:")
        else f"{detail}: {verdict.summary}"
    )
    return Fault(
        key=fault_key(verdict.rule, signal.gpu),
        rule=verdict.rule,
        signal=signal_family(signal),
        gpu=signal.gpu,
        code=signal_code(signal),
        severity=verdict.severity,
        action=verdict.action,
        message=f"{where}: {what}",
    )


def ordered(faults: Iterable[Fault]) -> list[Fault]:
    """Worst first (fatal, then warnings that need the node), then by GPU and rule."""
    return sorted(
        faults,
        key=lambda fault: (
            -fault.severity.rank,
            -fault.reaction,
            -1 if fault.gpu is None else fault.gpu,
            fault.rule,
        ),
    )
