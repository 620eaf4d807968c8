"""The writes that bring a Node to its desired health: pure diffs, None when nothing differs.

The monitor owns these things on its Node and writes nothing else:

- the clique labels (``nvidia.com/gpu.clique``, ``cdo.dev/nvlink-domain``,
  ``cdo.dev/multi-node-nvlink``): a JSON merge patch
  of ``metadata.labels`` naming only those keys;
- the ``cdo.dev/gpu-fault`` taint: ``spec.taints`` is a list without a merge key for JSON merge
  patches, so it is written whole, from the taints read, other writers' taints kept as they
  were, with that read's ``resourceVersion`` as precondition (a 409 means: read and try again);
- the ``cdo.dev/GpuHealthy`` condition: a strategic merge patch of the status subresource,
  which merges conditions by ``type`` and so leaves the kubelet's and the IMEX agent's alone;
- the ``cdo.dev/fault-trace-context`` annotation while a fault episode is open and spans are
  exported, and the circuit breaker's record ``cdo.dev/gpu-fault-breaker`` (shared/breaker): JSON
  merge patches of ``metadata.annotations`` naming only those keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from services.health_monitor.faults import Reaction
from services.health_monitor.state import ConditionState
from shared.crds.names import GPU_FAULT_TAINT, GPU_HEALTHY_CONDITION
from shared.kube.models import Condition, Taint
from shared.tracing import annotation_changes

# The taint's value says how bad it is; stable per effect, so tolerations can match on it.
TAINT_VALUES = {Reaction.NO_SCHEDULE: "warning", Reaction.NO_EXECUTE: "fatal"}


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def label_patch(
    current: Mapping[str, str], desired: Mapping[str, str | None]
) -> dict[str, Any] | None:
    """A merge patch setting or removing the labels that differ; None if none does."""
    changes = {
        key: value
        for key, value in desired.items()
        if (value is None and key in current) or (value is not None and current.get(key) != value)
    }
    return {"metadata": {"labels": changes}} if changes else None


def annotation_patch(
    current: Mapping[str, str], desired: Mapping[str, str | None]
) -> dict[str, Any] | None:
    """A merge patch setting or removing the annotations that differ; None if none does."""
    changes = annotation_changes(current, desired)
    return {"metadata": {"annotations": changes}} if changes else None


def _taint_body(taint: Taint) -> dict[str, Any]:
    body: dict[str, Any] = {"key": taint.key, "effect": taint.effect}
    if taint.value:
        body["value"] = taint.value
    if taint.time_added is not None:
        body["timeAdded"] = rfc3339(taint.time_added)
    return body


def fault_taint(reaction: Reaction, *, now: datetime) -> Taint | None:
    effect = reaction.effect
    if effect is None:
        return None
    return Taint(
        key=GPU_FAULT_TAINT,
        value=TAINT_VALUES[reaction],
        effect=effect,
        # NoExecute tolerationSeconds count from here.
        time_added=now if reaction is Reaction.NO_EXECUTE else None,
    )


def desired_taints(
    current: Sequence[Taint], reaction: Reaction, *, now: datetime
) -> list[dict[str, Any]] | None:
    """The whole taint list with the fault taint as ``reaction`` wants it; None if it already is.

    Other taints stay, in their order; the fault taint goes last.
    """
    ours = [taint for taint in current if taint.key == GPU_FAULT_TAINT]
    wanted = fault_taint(reaction, now=now)
    if wanted is None:
        if not ours:
            return None
    elif len(ours) == 1 and (ours[0].effect, ours[0].value) == (wanted.effect, wanted.value):
        return None
    others = [_taint_body(taint) for taint in current if taint.key != GPU_FAULT_TAINT]
    return others if wanted is None else [*others, _taint_body(wanted)]


def taint_patch(
    current: Sequence[Taint], reaction: Reaction, *, resource_version: str, now: datetime
) -> dict[str, Any] | None:
    """A merge patch replacing ``spec.taints``, valid only on the version read; None if equal."""
    taints = desired_taints(current, reaction, now=now)
    if taints is None:
        return None
    return {"metadata": {"resourceVersion": resource_version}, "spec": {"taints": taints}}


def condition_patch(
    current: Condition | None, desired: ConditionState, *, now: datetime
) -> dict[str, Any] | None:
    """A strategic merge patch of the status setting the condition; None if it already says so.

    ``lastTransitionTime`` moves only when the status changes; a new reason or message alone
    keeps it.
    """
    if current is not None and (current.status, current.reason, current.message) == (
        desired.status,
        desired.reason,
        desired.message,
    ):
        return None
    if current is None or current.status != desired.status or current.last_transition_time is None:
        transition = now
    else:
        transition = current.last_transition_time
    return {
        "status": {
            "conditions": [
                {
                    "type": GPU_HEALTHY_CONDITION,
                    "status": desired.status,
                    "reason": desired.reason,
                    "message": desired.message,
                    "lastTransitionTime": rfc3339(transition),
                    "lastHeartbeatTime": rfc3339(now),
                }
            ]
        }
    }
