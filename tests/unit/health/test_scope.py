"""Which faults stay on their GPU (GPU-confined) and which react on the whole node."""

from __future__ import annotations

import pytest

from services.health_monitor import classify
from services.health_monitor.faults import Fault, Reaction, fault_of, reaction_of
from services.health_monitor.scope import NVLINK_XIDS, Scope, confine, fault_scope, gpu_reactions
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
    RowRemapFailure,
    RowRemapPending,
    Signal,
    XidError,
)
from services.health_monitor.state import Episode, advance, desired_health
from shared.nvml import FabricState, RecoveryAction


def fault(signal: Signal) -> Fault:
    found = fault_of(signal, classify(signal))
    assert found is not None, signal
    return found


@pytest.mark.parametrize(
    ("signal", "scope"),
    [
        (XidError(gpu=2, xid=79), Scope.GPU),  # fallen off the bus
        (XidError(gpu=2, xid=48), Scope.GPU),  # double-bit ECC
        (XidError(gpu=2, xid=64), Scope.GPU),  # row remap failure
        (XidError(gpu=2, xid=54), Scope.GPU),  # auxiliary power: a warning of the GPU
        (XidError(gpu=2, xid=74), Scope.NODE),  # NVLink error: the fabric is shared
        (XidError(gpu=2, xid=145), Scope.NODE),  # NVLink5 RLW unit error
        (EccUncorrected(gpu=2, increase=1, total=1), Scope.GPU),
        (RowRemapPending(gpu=2), Scope.GPU),
        (RowRemapFailure(gpu=2), Scope.GPU),
        (GpuLost(gpu=2), Scope.GPU),
        (RecoveryActionRequired(gpu=2, action=RecoveryAction.GPU_RESET), Scope.GPU),
        (RecoveryActionRequired(gpu=2, action=RecoveryAction.DRAIN_AND_RESET), Scope.GPU),
        (RecoveryActionRequired(gpu=2, action=RecoveryAction.NODE_REBOOT), Scope.NODE),
        (RecoveryActionRequired(gpu=2, action=RecoveryAction.SYSTEM_REBOOT), Scope.NODE),
        (RecoveryActionRequired(gpu=2, action=RecoveryAction.RECOVER_IMEX_DOMAIN), Scope.NODE),
        (FabricNotReady(gpu=2, state=FabricState.NOT_STARTED), Scope.NODE),
        (
            FabricHealthFault(gpu=2, condition=FabricCondition.ROUTE_UNHEALTHY, value=1),
            Scope.NODE,
        ),
        (NvLinkDown(gpu=2, links=(0, 1), total=18), Scope.NODE),
        (CliqueDisagreement(cliques=("a.1", "b.2")), Scope.NODE),
        (NvmlUnavailable(reason="driver gone"), Scope.NODE),
    ],
)
def test_fault_scope(signal: Signal, scope: Scope) -> None:
    assert fault_scope(fault(signal)) is scope


def test_nvlink_xids_come_from_the_catalog() -> None:
    assert {74, 136, 144, 150, 155} <= NVLINK_XIDS
    assert 79 not in NVLINK_XIDS


def test_a_confined_fault_asks_nothing_of_the_node() -> None:
    (lost,) = confine([fault(XidError(gpu=2, xid=79))], gpu_count=4, enabled=True)
    assert lost.confined
    assert (lost.wanted, lost.reaction) == (Reaction.NO_EXECUTE, Reaction.NONE)
    assert gpu_reactions([lost]) == {2: Reaction.NO_EXECUTE}


def test_without_a_way_to_act_on_one_gpu_every_fault_is_node_level() -> None:
    faults = confine([fault(XidError(gpu=2, xid=79))], gpu_count=4, enabled=False)
    assert reaction_of(faults) is Reaction.NO_EXECUTE
    assert gpu_reactions(faults) == {}


def test_node_level_faults_keep_the_node_reaction_beside_confined_ones() -> None:
    faults = confine(
        [fault(XidError(gpu=2, xid=79)), fault(XidError(gpu=0, xid=74))],
        gpu_count=4,
        enabled=True,
    )
    assert [f.confined for f in faults] == [True, False]
    assert reaction_of(faults) is Reaction.NO_EXECUTE  # the NVLink XID taints the node


@pytest.mark.parametrize(
    ("lost", "node_reaction"),
    [
        ((0, 1, 2), Reaction.NONE),  # one GPU still serves: its pods stay
        ((0, 1, 2, 3), Reaction.NO_EXECUTE),  # every GPU lost: the node as a whole
    ],
)
def test_every_gpu_fatally_faulted_becomes_node_level(
    lost: tuple[int, ...], node_reaction: Reaction
) -> None:
    faults = confine([fault(GpuLost(gpu=gpu)) for gpu in lost], gpu_count=4, enabled=True)
    assert reaction_of(faults) is node_reaction


def test_warnings_on_every_gpu_stay_confined() -> None:
    faults = confine(
        [fault(RowRemapPending(gpu=gpu)) for gpu in range(4)], gpu_count=4, enabled=True
    )
    assert all(f.confined for f in faults)
    assert gpu_reactions(faults) == dict.fromkeys(range(4), Reaction.NO_SCHEDULE)


def test_the_node_condition_names_the_confined_gpu_and_stays_true() -> None:
    faults = confine([fault(XidError(gpu=2, xid=79))], gpu_count=4, enabled=True)
    step = advance(Episode(), faults=faults, now=0.0, hold_down_s=30)
    health = desired_health(
        faults=faults, clique=None, episode=step.episode, now=0.0, hold_down_s=30
    )
    assert health.reaction is Reaction.NONE
    assert (health.condition.status, health.condition.reason) == ("True", "GpuDeviceFault")
    assert "GPU 2" in health.condition.message
    # The hold-down keeps nothing on the node for a confined fault.
    later = desired_health(faults=(), clique=None, episode=step.episode, now=1.0, hold_down_s=30)
    assert later.reaction is Reaction.NONE
