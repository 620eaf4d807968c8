"""The closed sets of values events carry, as the code that produces them names them.

Each set is a ``StrEnum`` the producer uses (the health monitor's signal families, severities
and actions; the IMEX agent's daemon and domain states; the domain controller's phases), and
:func:`one_of` puts the same values into the event's JSON Schema as an ``enum``. So the
contract in proto/ cannot list a value the code does not send, or miss one it does. The event
fields stay ``str`` when decoded: a consumer built before a value was added still takes the
event (the value is new to it, not malformed).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any


class FaultSignal(enum.StrEnum):
    """The family of the health signal a NodeFault reports."""

    XID = "xid"
    FABRIC = "fabric"
    NVLINK = "nvlink"
    ECC = "ecc"
    REMAPPED_ROWS = "remapped_rows"
    GPU_LOST = "gpu_lost"
    RECOVERY_ACTION = "recovery_action"
    CLIQUE = "clique"  # the node's clique label disagrees with what NVML reports
    NVML = "nvml"  # NVML itself cannot be read


class Severity(enum.StrEnum):
    """How bad a signal is. Only severity drives node reactions (taints, conditions)."""

    OK = "ok"  # nothing to do for the node; counted, never published as a fault
    WARNING = "warning"  # report; keep new work away where the action says so
    FATAL = "fatal"  # the GPU cannot serve its workloads; they must move

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Severity.OK: 0, Severity.WARNING: 1, Severity.FATAL: 2}

FAULT_SEVERITIES = (Severity.WARNING, Severity.FATAL)
"""The severities a NodeFault carries."""


class Action(enum.StrEnum):
    """What should happen to recover; a recommendation carried with the verdict."""

    NONE = "none"
    RESTART_APP = "restart_app"  # the application's own fault: it restarts, the node is fine
    RESET_GPU = "reset_gpu"
    DRAIN_NODE = "drain_node"  # take work off the node (reboot, repair, operator attention)
    RECOVER_IMEX_DOMAIN = "recover_imex_domain"  # restart the multi-node IMEX domain


class FaultScope(enum.StrEnum):
    """What a fault touches."""

    NODE = "node"  # the node reacts: its fault taint
    GPU = "gpu"  # only the pods holding the GPU: evicted, or a DRA device taint


class DomainPhase(enum.StrEnum):
    """A ComputeDomain's phase in membership events."""

    PENDING = "Pending"
    PLACED = "Placed"
    READY = "Ready"
    NOT_READY = "NotReady"
    DEGRADED = "Degraded"
    DELETING = "Deleting"
    DELETED = "Deleted"  # the last event of a domain that is gone


class MemberStatus(enum.StrEnum):
    """A member node's status in a domain (NVIDIA's ``status.nodes[].status``)."""

    READY = "Ready"
    NOT_READY = "NotReady"


class ImexDaemonState(enum.StrEnum):
    """The node's IMEX daemon, as ``nvidia-imex-ctl`` reports it (or not running)."""

    NOT_RUNNING = "NOT_RUNNING"
    INITIALIZING = "INITIALIZING"
    WAITING_FOR_PEERS = "WAITING_FOR_PEERS"
    READY = "READY"
    UNAVAILABLE = "UNAVAILABLE"


class ImexDomainState(enum.StrEnum):
    """The IMEX domain's state as the node's daemon sees it."""

    UP = "UP"
    DEGRADED = "DEGRADED"
    DOWN = "DOWN"
    UNKNOWN = "UNKNOWN"


def one_of(values: Iterable[enum.StrEnum]) -> dict[str, Any]:
    """The JSON Schema ``enum`` of these values (for ``Meta(extra_json_schema=...)``)."""
    return {"enum": [value.value for value in values]}
