"""Taints, tolerations and when a NoExecute taint evicts a pod: pure decisions.

The rules are the taint manager's: for every NoExecute taint of the node the pod needs a
toleration; the first toleration that matches a taint is the one that counts for it. A taint
without one evicts at once; a matching toleration without ``tolerationSeconds`` tolerates the
taint for ever; otherwise the pod goes ``tolerationSeconds`` after the taint was added
(``timeAdded``, or when it was first seen if the writer left that out). The pod is evicted at
the earliest of these times.

Whether one toleration matches one taint is :mod:`shared.scheduling.taints`' rule, the one the
schedulers use.

Real clusters give every pod tolerations for ``node.kubernetes.io/not-ready`` and
``node.kubernetes.io/unreachable`` (NoExecute, 300 s) at admission;
:func:`with_default_tolerations` applies the same rule here, where no admission plugin adds them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta

from shared.kube.models import Taint, Toleration
from shared.scheduling.taints import toleration_matches as tolerates
from sim.kubelet.names import LIFECYCLE_TAINT_KEYS, NO_EXECUTE


def with_default_tolerations(
    tolerations: Sequence[Toleration], *, seconds: int
) -> tuple[Toleration, ...]:
    """``tolerations`` plus a ``seconds`` toleration for each lifecycle taint not tolerated."""
    extra = [
        Toleration(key=key, operator="Exists", effect=NO_EXECUTE, toleration_seconds=seconds)
        for key in LIFECYCLE_TAINT_KEYS
        if not any(tolerates(t, Taint(key=key, effect=NO_EXECUTE)) for t in tolerations)
    ]
    return (*tolerations, *extra)


def eviction_time(
    tolerations: Sequence[Toleration],
    taints: Iterable[Taint],
    *,
    added_at: Callable[[Taint], datetime],
) -> datetime | None:
    """When the node's NoExecute taints evict a pod with ``tolerations``; None: never.

    ``added_at`` says since when a taint counts (its ``timeAdded`` where set).
    """
    earliest: datetime | None = None
    for taint in taints:
        if taint.effect != NO_EXECUTE:
            continue
        toleration = next((t for t in tolerations if tolerates(t, taint)), None)
        if toleration is not None and toleration.toleration_seconds is None:
            continue
        seconds = 0 if toleration is None else max(0, toleration.toleration_seconds or 0)
        due = added_at(taint) + timedelta(seconds=seconds)
        if earliest is None or due < earliest:
            earliest = due
    return earliest


class TaintTimes:
    """Since when each taint counts: its ``timeAdded``, else when it was first seen here."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str, str, str], datetime] = {}

    def added_at(self, node: str, taint: Taint, *, now: datetime) -> datetime:
        if taint.time_added is not None:
            return taint.time_added
        return self._seen.setdefault((node, taint.key, taint.value, taint.effect), now)

    def keep_only(self, node: str, taints: Iterable[Taint]) -> None:
        """Forget the node's taints that are gone, so a taint added again counts afresh."""
        present = {(node, t.key, t.value, t.effect) for t in taints}
        for identity in [i for i in self._seen if i[0] == node and i not in present]:
            del self._seen[identity]


__all__ = ["eviction_time", "tolerates", "with_default_tolerations"]
