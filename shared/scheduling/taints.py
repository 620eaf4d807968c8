"""Taints against tolerations, kube-scheduler's TaintToleration filter.

A toleration with an empty effect tolerates every effect; ``Exists`` with an empty key
tolerates every taint; ``Equal`` (or no operator) needs the same value. Only ``NoSchedule``
and ``NoExecute`` taints keep a pod off a node; ``PreferNoSchedule`` is a preference.
"""

from __future__ import annotations

from collections.abc import Iterable

from shared.kube.models import Taint, Toleration

FILTERED_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def toleration_matches(toleration: Toleration, taint: Taint) -> bool:
    """Kubernetes' ToleratesTaint."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    if toleration.operator in ("Equal", ""):
        return toleration.value == taint.value
    return False


def tolerated(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    return any(toleration_matches(t, taint) for t in tolerations)


def untolerated_taint(taints: Iterable[Taint], tolerations: Iterable[Toleration]) -> Taint | None:
    """The first NoSchedule or NoExecute taint the tolerations do not tolerate, or None."""
    tolerations = tuple(tolerations)
    for taint in taints:
        if taint.effect in FILTERED_EFFECTS and not tolerated(tolerations, taint):
            return taint
    return None
