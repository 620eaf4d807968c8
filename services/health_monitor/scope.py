"""Which faults stay on their GPU and which concern the whole node: a pure decision.

A fault is *GPU-confined* when it is about one GPU and nothing else on the node depends on
that GPU: the pods holding it are affected, the node's other GPUs and their pods are not. Such
a fault reacts on the GPU (its pods evicted, or a DRA device taint), not on the Node. Every
other fault is *node-level* and taints the Node as before. By signal family:

- ``xid``: GPU, except the NVLink XIDs, which concern the links to the NVSwitch fabric every GPU
  of the tray uses (node);
- ``ecc``, ``remapped_rows``: GPU (its own memory); ``gpu_lost``: GPU (the others still answer);
- ``recovery_action``: GPU, except node reboot, system reboot and IMEX domain recovery (node);
- ``fabric``, ``nvlink``, ``clique``: node (the fabric and the clique are shared);
- ``nvml``: node (nothing is known about any GPU).

A fault whose rule recommends recovering the IMEX domain is node-level whatever its family. When
every GPU of the node has a GPU-confined fatal fault (every GPU lost, say), nothing on the node
can run: those faults are node-level too. Confinement also needs a way to act on one GPU (the
kubelet's PodResources API, or DRA device taints); without one every fault is node-level.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence

import msgspec

from services.health_monitor.faults import Fault, Reaction
from services.health_monitor.rules import Action
from services.health_monitor.xid_catalog import XID_CATALOG
from shared.nvml import RecoveryAction


class Scope(enum.StrEnum):
    """Where a fault reacts."""

    GPU = "gpu"
    NODE = "node"


GPU_FAMILIES = frozenset({"xid", "ecc", "remapped_rows", "gpu_lost", "recovery_action"})
"""Signal families whose faults can stay on their GPU."""

NVLINK_XIDS = frozenset(
    xid for xid, (_bucket, summary) in XID_CATALOG.items() if summary.startswith("NVLink")
)
"""XIDs about NVLink (74, 136, 144-150, 155 ...): node-level, the fabric is shared."""

NODE_RECOVERY_ACTIONS = frozenset(
    {RecoveryAction.NODE_REBOOT, RecoveryAction.SYSTEM_REBOOT, RecoveryAction.RECOVER_IMEX_DOMAIN}
)
"""Recovery actions NVML asks of the node or the IMEX domain rather than of the GPU."""


def fault_scope(fault: Fault) -> Scope:
    """The scope of one fault on its own (before looking at the node's other GPUs)."""
    if fault.gpu is None or fault.signal not in GPU_FAMILIES:
        return Scope.NODE
    if fault.action is Action.RECOVER_IMEX_DOMAIN:
        return Scope.NODE
    if fault.signal == "xid" and fault.code in NVLINK_XIDS:
        return Scope.NODE
    if fault.signal == "recovery_action" and fault.code in NODE_RECOVERY_ACTIONS:
        return Scope.NODE
    return Scope.GPU


def confine(faults: Iterable[Fault], *, gpu_count: int, enabled: bool) -> tuple[Fault, ...]:
    """``faults`` with ``confined`` set on those that react on their GPU only.

    ``gpu_count`` is how many GPUs the node has (0: unknown); ``enabled`` False (no way to act
    on one GPU) leaves every fault node-level.
    """
    faults = tuple(faults)
    if not enabled:
        return tuple(_with(fault, confined=False) for fault in faults)
    candidates = [fault for fault in faults if fault_scope(fault) is Scope.GPU]
    fatal_gpus = {fault.gpu for fault in candidates if fault.wanted is Reaction.NO_EXECUTE}
    every_gpu = gpu_count > 0 and fatal_gpus >= set(range(gpu_count))
    return tuple(
        _with(fault, confined=not every_gpu and fault_scope(fault) is Scope.GPU) for fault in faults
    )


def _with(fault: Fault, *, confined: bool) -> Fault:
    return (
        fault if fault.confined is confined else msgspec.structs.replace(fault, confined=confined)
    )


def gpu_reactions(faults: Sequence[Fault]) -> dict[int, Reaction]:
    """What each GPU's confined faults ask of it (GPUs asking nothing are left out)."""
    wanted: dict[int, Reaction] = {}
    for fault in faults:
        if fault.confined and fault.gpu is not None and fault.wanted > Reaction.NONE:
            wanted[fault.gpu] = max(wanted.get(fault.gpu, Reaction.NONE), fault.wanted)
    return wanted
