"""The vocabulary of health classification: severities, actions, rules and verdicts."""

from __future__ import annotations

import enum
from collections.abc import Iterable

import msgspec


class Severity(enum.StrEnum):
    """How bad a signal is. Only severity drives node reactions (taints, conditions)."""

    OK = "ok"  # nothing to do for the node; counted
    WARNING = "warning"  # report; keep new work away where the action says so
    FATAL = "fatal"  # the GPU cannot serve its workloads; they must move

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Severity.OK: 0, Severity.WARNING: 1, Severity.FATAL: 2}


class Action(enum.StrEnum):
    """What should happen to recover; a recommendation carried with the verdict."""

    NONE = "none"
    RESTART_APP = "restart_app"  # the application's own fault: it restarts, the node is fine
    RESET_GPU = "reset_gpu"
    DRAIN_NODE = "drain_node"  # take work off the node (reboot, repair, operator attention)
    RECOVER_IMEX_DOMAIN = "recover_imex_domain"  # restart the multi-node IMEX domain


class Rule(msgspec.Struct, frozen=True, kw_only=True):
    """One row of the classification table."""

    severity: Severity
    action: Action
    summary: str
    ignored: bool = False  # an operator override: drop the signal, do not even count it


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    """The classification of one signal: the rule that matched and what it says."""

    rule: str  # the table key, e.g. "xid.79" or "fabric.health.route_unhealthy"
    severity: Severity
    action: Action
    summary: str
    ignored: bool = False


def worst(verdicts: Iterable[Verdict]) -> Severity:
    """The highest severity among verdicts that are not ignored (OK when none)."""
    return max(
        (verdict.severity for verdict in verdicts if not verdict.ignored),
        key=lambda severity: severity.rank,
        default=Severity.OK,
    )
