"""What the workload controllers ask of a pod: is it active, ready, available, and which goes first.

All pure: a pod and (where time matters) ``now`` in, a fact out.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from shared.kube.models import Pod

TERMINAL_PHASES = ("Succeeded", "Failed")
# Scale-down preference by phase: a pod that is not running yet is the cheapest to lose.
_PHASE_RANK = {"Pending": 0, "": 0, "Unknown": 1, "Running": 2}


def is_terminal(pod: Pod) -> bool:
    return pod.status.phase in TERMINAL_PHASES


def is_terminating(pod: Pod) -> bool:
    return pod.metadata.deletion_timestamp is not None


def is_active(pod: Pod) -> bool:
    """Counts toward a controller's replicas: neither finished nor being deleted."""
    return not is_terminal(pod) and not is_terminating(pod)


def is_ready(pod: Pod) -> bool:
    ready = pod.condition("Ready")
    return ready is not None and ready.status == "True"


def ready_since(pod: Pod) -> datetime | None:
    ready = pod.condition("Ready")
    if ready is None or ready.status != "True":
        return None
    return ready.last_transition_time


def available_in(pod: Pod, *, min_ready_seconds: int, now: datetime) -> float | None:
    """Seconds until a ready pod counts as available (0: it is); None when it is not ready."""
    if not is_ready(pod):
        return None
    if min_ready_seconds <= 0:
        return 0.0
    since = ready_since(pod)
    if since is None:
        return float(min_ready_seconds)
    return max(0.0, min_ready_seconds - (now - since).total_seconds())


def is_available(pod: Pod, *, min_ready_seconds: int, now: datetime) -> bool:
    return available_in(pod, min_ready_seconds=min_ready_seconds, now=now) == 0.0


def next_availability(
    pods: Iterable[Pod], *, min_ready_seconds: int, now: datetime
) -> float | None:
    """Seconds until the next ready pod becomes available, for a timed look again."""
    waits = [
        wait
        for pod in pods
        if (wait := available_in(pod, min_ready_seconds=min_ready_seconds, now=now))
    ]
    return min(waits) if waits else None


def _epoch(moment: datetime | None) -> float:
    return moment.timestamp() if moment is not None else 0.0


def deletion_order(pods: Sequence[Pod]) -> list[Pod]:
    """``pods`` sorted so that the ones to delete first on scale-down come first.

    Unscheduled before scheduled; Pending before Unknown before Running; not ready before
    ready; ready for a shorter time before longer; newer before older; then by name so the
    choice is deterministic.
    """

    def rank(pod: Pod) -> tuple[int, int, int, float, float, str]:
        ready = is_ready(pod)
        return (
            1 if pod.spec.node_name else 0,
            _PHASE_RANK.get(pod.status.phase, 0),
            1 if ready else 0,
            -_epoch(ready_since(pod)) if ready else 0.0,
            -_epoch(pod.metadata.creation_timestamp),
            pod.metadata.name,
        )

    return sorted(pods, key=rank)


def labels_match(labels: dict[str, str], wanted: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in wanted.items())


def template_labels(template: dict[str, Any]) -> dict[str, str]:
    labels = (template.get("metadata") or {}).get("labels") or {}
    return {str(k): str(v) for k, v in labels.items()}


def pod_from_template(
    template: dict[str, Any],
    *,
    generate_name: str,
    namespace: str,
    owner_reference: dict[str, Any],
    extra_labels: dict[str, str] | None = None,
    extra_annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The body of a pod made from a pod template, as the real controllers make one."""
    template_meta = template.get("metadata") or {}
    labels = dict(template_meta.get("labels") or {}) | (extra_labels or {})
    annotations = dict(template_meta.get("annotations") or {}) | (extra_annotations or {})
    metadata: dict[str, Any] = {
        "generateName": generate_name,
        "namespace": namespace,
        "ownerReferences": [owner_reference],
    }
    if labels:
        metadata["labels"] = labels
    if annotations:
        metadata["annotations"] = annotations
    if template_meta.get("finalizers"):
        metadata["finalizers"] = list(template_meta["finalizers"])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": copy.deepcopy(template.get("spec") or {}),
    }
