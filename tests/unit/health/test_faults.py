"""From classified signals to faults, and the reaction each fault asks of the node."""

from __future__ import annotations

import pytest

from services.health_monitor import classify
from services.health_monitor.classification import Classifier
from services.health_monitor.faults import (
    Reaction,
    fault_of,
    is_transient,
    ordered,
    reaction_of,
    signal_family,
)
from services.health_monitor.rules import Action, Rule, Severity
from services.health_monitor.signals import (
    CliqueDisagreement,
    EccUncorrected,
    FabricCondition,
    FabricHealthFault,
    FabricNotReady,
    GpuLost,
    NvLinkDown,
    NvmlUnavailable,
    RecoveryActionRequired,
    RowRemapPending,
    Signal,
    XidError,
)
from shared.nvml import FabricState, RecoveryAction


@pytest.mark.parametrize(
    ("signal", "reaction"),
    [
        (XidError(gpu=1, xid=79), Reaction.NO_EXECUTE),
        (XidError(gpu=1, xid=48), Reaction.NO_EXECUTE),
        (XidError(gpu=1, xid=54), Reaction.NO_SCHEDULE),  # warning, drain_node
        (XidError(gpu=1, xid=78), Reaction.NONE),  # warning, no action
        (XidError(gpu=1, xid=999_999), Reaction.NONE),  # xid.default: warning, no action
        (NvLinkDown(gpu=0, links=(3,), total=18), Reaction.NO_SCHEDULE),
        (NvLinkDown(gpu=0, links=tuple(range(18)), total=18), Reaction.NO_EXECUTE),
        (RowRemapPending(gpu=2), Reaction.NO_SCHEDULE),
        (GpuLost(gpu=2), Reaction.NO_EXECUTE),
        (FabricNotReady(gpu=0, state=FabricState.IN_PROGRESS), Reaction.NONE),
        (
            FabricHealthFault(gpu=0, condition=FabricCondition.ROUTE_UNHEALTHY, value=1),
            Reaction.NO_EXECUTE,
        ),
        (RecoveryActionRequired(gpu=0, action=RecoveryAction.GPU_RESET), Reaction.NO_EXECUTE),
        (CliqueDisagreement(cliques=("a.1", "a.2")), Reaction.NONE),
        (NvmlUnavailable(reason="driver not loaded"), Reaction.NO_SCHEDULE),
    ],
)
def test_reaction_of_each_fault(signal: Signal, reaction: Reaction) -> None:
    fault = fault_of(signal, classify(signal))
    assert fault is not None
    assert fault.reaction is reaction


@pytest.mark.parametrize("xid", [13, 31, 43, 45, 68, 14])
def test_application_and_ignored_xids_are_no_fault(xid: int) -> None:
    signal = XidError(gpu=0, xid=xid)
    assert fault_of(signal, classify(signal)) is None


def test_an_override_can_ignore_a_fault() -> None:
    classifier = Classifier(
        {"xid.79": Rule(severity=Severity.FATAL, action=Action.NONE, summary="x", ignored=True)}
    )
    signal = XidError(gpu=0, xid=79)
    assert fault_of(signal, classifier.classify(signal)) is None


def test_a_fault_names_its_rule_gpu_and_signal() -> None:
    signal = XidError(gpu=1, xid=79)
    fault = fault_of(signal, classify(signal))
    assert fault is not None
    assert (fault.key, fault.rule, fault.signal, fault.gpu, fault.code) == (
        "xid.79@gpu1",
        "xid.79",
        "xid",
        1,
        79,
    )
    assert (fault.severity, fault.action) == (Severity.FATAL, Action.DRAIN_NODE)
    assert fault.message == "GPU 1: XID 79: GPU has fallen off the bus (NVIDIA: RESTART_BM)"


def test_node_wide_faults_have_no_gpu() -> None:
    signal = CliqueDisagreement(cliques=("a.1", "a.2"))
    fault = fault_of(signal, classify(signal))
    assert fault is not None
    assert (fault.key, fault.gpu, fault.signal) == ("fabric.clique_disagreement", None, "clique")
    assert fault.message.startswith("node: cliques a.1, a.2: ")


def test_transient_signals_are_the_reported_once_kind() -> None:
    assert is_transient(XidError(gpu=0, xid=79))
    assert is_transient(EccUncorrected(gpu=0, increase=1, total=1))
    assert not is_transient(GpuLost(gpu=0))
    assert not is_transient(RecoveryActionRequired(gpu=0, action=1))


def test_families() -> None:
    assert signal_family(RowRemapPending(gpu=0)) == "remapped_rows"
    assert signal_family(FabricNotReady(gpu=0, state=1)) == "fabric"
    assert signal_family(NvmlUnavailable(reason="x")) == "nvml"


def test_ordered_puts_the_worst_first() -> None:
    signals: list[Signal] = [
        XidError(gpu=3, xid=78),
        NvLinkDown(gpu=0, links=(1,), total=18),
        XidError(gpu=2, xid=79),
        CliqueDisagreement(cliques=("a", "b")),
    ]
    faults = [f for s in signals if (f := fault_of(s, classify(s))) is not None]
    assert [f.key for f in ordered(faults)] == [
        "xid.79@gpu2",
        "nvlink.down@gpu0",
        "fabric.clique_disagreement",
        "xid.78@gpu3",
    ]
    assert reaction_of(faults) is Reaction.NO_EXECUTE
    assert reaction_of([]) is Reaction.NONE
