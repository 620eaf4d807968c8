"""A PodDisruptionBudget's status from its pods and their controllers' scale (pure functions),
as kube-controller-manager's disruption controller computes it.

- The budget's pods: those of its namespace that its ``spec.selector`` matches (an empty
  selector matches every pod, none matches none).
- ``expectedPods`` and ``desiredHealthy``: with an integer ``minAvailable``, the number of pods
  and that integer; with a percentage ``minAvailable`` or any ``maxUnavailable``, the sum of the
  scale (desired replicas) of the pods' distinct controllers (a ReplicaSet that a Deployment
  controls counts as the Deployment, once), and ``minAvailable`` of it, or it less
  ``maxUnavailable`` (percentages of it rounded up; never below 0). Pods without a controller
  are left out of that sum; a controlled pod whose controller has no scale is an error.
- ``disruptedPods``: the evictions the API server recorded, kept for pods that still exist, are
  not being deleted and were evicted less than :data:`DELETION_TIMEOUT` ago (then the
  controller looks again).
- ``currentHealthy``: pods that are Ready, not being deleted and not in ``disruptedPods``.
- ``disruptionsAllowed``: ``currentHealthy - desiredHealthy``, but 0 when that is negative or
  when no pod is expected (a budget that matches no pod yet is safe when its first pods come).
- ``observedGeneration``: the budget's generation; condition ``DisruptionAllowed``: True
  (``SufficientPods``) when a disruption is allowed, else False (``InsufficientPods``); an
  error gives 0 disruptions and False with reason ``SyncFailed`` and the error as message.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import msgspec

from shared.kube.affinity import LabelSelector
from shared.kube.meta import KubeObject, OwnerReference
from shared.kube.models import Pod
from shared.scheduling.selectors import label_selector_matches
from sim.controllers.pods import is_ready

DELETION_TIMEOUT = timedelta(minutes=2)
"""How long an eviction the API server recorded counts before the pod should be gone."""
CONDITION = "DisruptionAllowed"
SUFFICIENT = "SufficientPods"
INSUFFICIENT = "InsufficientPods"
SYNC_FAILED = "SyncFailed"


class BudgetSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    selector: LabelSelector | None = None


class BudgetStatus(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    observed_generation: int = 0
    disrupted_pods: dict[str, str] = msgspec.field(default_factory=dict)
    disruptions_allowed: int = 0
    current_healthy: int = 0
    desired_healthy: int = 0
    expected_pods: int = 0
    conditions: tuple[dict[str, Any], ...] = ()


class Budget(KubeObject, frozen=True, kw_only=True):
    spec: BudgetSpec = msgspec.field(default_factory=BudgetSpec)
    status: BudgetStatus = msgspec.field(default_factory=BudgetStatus)


class ScaleError(Exception):
    """The budget's expected pods cannot be told (its message goes into the condition)."""


ScaleOf = Callable[[OwnerReference, str], tuple[str, int] | None]
"""(controller reference, namespace) -> (uid of what it scales as, its desired replicas), or
None when no such controller exists."""


def controller_of(pod: Pod) -> OwnerReference | None:
    return next((ref for ref in pod.metadata.owner_references if ref.controller), None)


def selects(budget: Budget, pod: Pod) -> bool:
    """Whether the budget covers the pod: same namespace, and its selector (if any) matches."""
    selector = budget.spec.selector
    return (
        selector is not None
        and pod.metadata.namespace == budget.metadata.namespace
        and label_selector_matches(selector, pod.metadata.labels)
    )


def scaled(value: int | str, total: int) -> int:
    """An int-or-percent of ``total``, a percentage rounded up."""
    if isinstance(value, int):
        return value
    return math.ceil(int(value.rstrip("%")) * total / 100)


def expected_scale(pods: Sequence[Pod], scale_of: ScaleOf) -> int:
    """The summed desired replicas of the pods' controllers (see the module docstring)."""
    scales: dict[str, int] = {}
    for pod in pods:
        ref = controller_of(pod)
        if ref is None or ref.uid in scales:
            continue
        found = scale_of(ref, pod.metadata.namespace)
        if found is None:
            raise ScaleError(f'found no controllers for pod "{pod.metadata.name}"')
        uid, replicas = found
        scales[uid] = replicas
    return sum(scales.values())


def counts(spec: BudgetSpec, pods: Sequence[Pod], scale_of: ScaleOf) -> tuple[int, int]:
    """(expectedPods, desiredHealthy)."""
    if spec.max_unavailable is not None:
        expected = expected_scale(pods, scale_of)
        return expected, max(0, expected - scaled(spec.max_unavailable, expected))
    if isinstance(spec.min_available, int):
        return len(pods), spec.min_available
    if spec.min_available is not None:
        expected = expected_scale(pods, scale_of)
        return expected, scaled(spec.min_available, expected)
    return 0, 0


def still_disrupted(
    recorded: Mapping[str, str], pods: Sequence[Pod], *, now: datetime
) -> tuple[dict[str, str], datetime | None]:
    """The evictions still in flight, and when the oldest of them times out."""
    kept: dict[str, str] = {}
    recheck: datetime | None = None
    for pod in pods:
        name = pod.metadata.name
        if pod.metadata.deletion_timestamp is not None or name not in recorded:
            continue
        try:
            at = datetime.fromisoformat(recorded[name].replace("Z", "+00:00"))
        except ValueError:
            continue
        due = at + DELETION_TIMEOUT
        if due <= now:
            continue  # it should have been deleted by now: it counts again
        kept[name] = recorded[name]
        recheck = due if recheck is None else min(recheck, due)
    return kept, recheck


def _condition(allowed: int, generation: int, *, error: str = "") -> dict[str, Any]:
    reason = SYNC_FAILED if error else (SUFFICIENT if allowed > 0 else INSUFFICIENT)
    return {
        "type": CONDITION,
        "status": "True" if allowed > 0 and not error else "False",
        "reason": reason,
        "message": error,
        "observedGeneration": generation,
    }


def budget_status(
    budget: Budget, pods: Sequence[Pod], scale_of: ScaleOf, *, now: datetime
) -> tuple[BudgetStatus, datetime | None]:
    """The budget's next status and when to look again (None: only on changes); ``pods`` are
    the pods its selector matches."""
    generation = budget.metadata.generation
    try:
        expected, desired = counts(budget.spec, pods, scale_of)
    except ScaleError as exc:
        failed = msgspec.structs.replace(
            budget.status,
            disruptions_allowed=0,
            observed_generation=generation,
            conditions=(_condition(0, generation, error=str(exc)),),
        )
        return failed, None
    disrupted, recheck = still_disrupted(budget.status.disrupted_pods, pods, now=now)
    healthy = sum(
        1
        for pod in pods
        if pod.metadata.deletion_timestamp is None
        and pod.metadata.name not in disrupted
        and is_ready(pod)
    )
    allowed = healthy - desired
    if expected <= 0 or allowed <= 0:
        allowed = 0
    status = BudgetStatus(
        observed_generation=generation,
        disrupted_pods=disrupted,
        disruptions_allowed=allowed,
        current_healthy=healthy,
        desired_healthy=desired,
        expected_pods=expected,
        conditions=(_condition(allowed, generation),),
    )
    return status, recheck


def same_status(current: BudgetStatus, new: BudgetStatus) -> bool:
    """Whether writing ``new`` would change nothing that matters (transition times aside)."""
    strip = [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in current.conditions]
    return msgspec.structs.replace(current, conditions=()) == msgspec.structs.replace(
        new, conditions=()
    ) and strip == [dict(c) for c in new.conditions]
