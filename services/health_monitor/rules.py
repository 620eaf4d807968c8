"""The vocabulary of health classification: severities, actions, rules and verdicts."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from shared.events.vocabulary import Action, Severity

# The event vocabulary (shared/events/vocabulary.py) is where these live, so that NodeFault's
# schema lists exactly the values classification produces.
__all__ = ["Action", "Rule", "Severity", "Verdict", "worst"]


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
