"""What the node lifecycle controller wants of a node: pure decisions.

- A node whose heartbeat has not moved for the grace period gets every kubelet condition
  (Ready, MemoryPressure, DiskPressure, PIDPressure) set to ``Unknown``, reason
  ``NodeStatusUnknown``: :func:`unknown_conditions`.
- The Ready condition decides the lifecycle taints: Ready=False -> ``node.kubernetes.io/not-ready``,
  Ready=Unknown -> ``node.kubernetes.io/unreachable``, each as NoSchedule and NoExecute (the
  NoExecute one with ``timeAdded``); Ready=True -> neither. Other writers' taints are kept as
  they are: :func:`lifecycle_taints`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from shared.kube.models import Condition, Taint
from sim.kubelet import names
from sim.kubelet.models import Node
from sim.kubelet.timefmt import rfc3339

_TAINT_FOR_READY = {"False": names.TAINT_NOT_READY, "Unknown": names.TAINT_UNREACHABLE}
_UNKNOWN_MESSAGE = "Kubelet stopped posting node status."


def ready_status(node: Node) -> str | None:
    """The Ready condition's status ("True", "False", "Unknown"), or None before any report."""
    condition = node.condition(names.READY)
    return condition.status if condition is not None else None


def unknown_conditions(node: Node, *, now: datetime) -> list[dict[str, Any]]:
    """The kubelet conditions to set to Unknown (empty when all are Unknown already).

    Ready is included even when the kubelet never reported it.
    """
    present = {c.type: c for c in node.status.conditions}
    out: list[dict[str, Any]] = []
    for kind in names.KUBELET_NODE_CONDITIONS:
        old: Condition | None = present.get(kind)
        if old is None and kind != names.READY:
            continue
        if old is not None and old.status == "Unknown":
            continue
        out.append(
            {
                "type": kind,
                "status": "Unknown",
                "reason": names.REASON_NODE_STATUS_UNKNOWN,
                "message": _UNKNOWN_MESSAGE,
                "lastTransitionTime": rfc3339(now),
            }
        )
    return out


def lifecycle_taints(
    taints: tuple[Taint, ...], ready: str | None, *, now: datetime
) -> tuple[Taint, ...] | None:
    """The node's taints with the lifecycle taints ``ready`` calls for; None: no change.

    Before the first Ready report (``ready`` None) nothing changes.
    """
    if ready is None:
        return None
    wanted_key = _TAINT_FOR_READY.get(ready)
    kept = [t for t in taints if t.key not in names.LIFECYCLE_TAINT_KEYS]
    current = {(t.key, t.effect): t for t in taints if t.key in names.LIFECYCLE_TAINT_KEYS}
    wanted: list[Taint] = []
    if wanted_key is not None:
        for effect in (names.NO_SCHEDULE, names.NO_EXECUTE):
            existing = current.get((wanted_key, effect))
            if existing is None:
                existing = Taint(
                    key=wanted_key,
                    effect=effect,
                    time_added=now if effect == names.NO_EXECUTE else None,
                )
            wanted.append(existing)
    if {(t.key, t.effect) for t in wanted} == set(current):
        return None
    return (*kept, *wanted)


def taint_json(taint: Taint) -> dict[str, str]:
    """A taint as the API writes it (no null fields)."""
    out = {"key": taint.key, "effect": taint.effect}
    if taint.value:
        out["value"] = taint.value
    if taint.time_added is not None:
        out["timeAdded"] = rfc3339(taint.time_added)
    return out
