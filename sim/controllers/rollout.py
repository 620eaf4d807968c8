"""The Deployment controller's decisions, as pure functions of the objects in the cache.

- Which ReplicaSet is *new*: the oldest owned one whose pod template equals the Deployment's,
  ignoring the ``pod-template-hash`` label. Every other owned ReplicaSet is *old*.
- A new ReplicaSet is named ``<deployment>-<hash>``, the hash computed from the template and
  ``status.collisionCount`` (FNV-1a 32 over the template's canonical JSON, its decimal digits
  spelled in the API's "safe" alphabet, as the real names look); its labels, selector and pod
  template carry ``pod-template-hash: <hash>``.
- ``RollingUpdate`` follows the real arithmetic: the new ReplicaSet grows while the total of
  all ``spec.replicas`` stays within ``replicas + maxSurge``; old ReplicaSets shrink, oldest
  first, first by their unavailable pods and then while the available pods stay at least
  ``replicas - maxUnavailable``. ``maxSurge`` rounds up and ``maxUnavailable`` down; both zero
  means one unavailable.
- ``Recreate``: old ReplicaSets go to zero; once none of their pods is left running (terminal
  or gone), the new one is created (or scaled) at ``replicas``.
- Status: sums over the ReplicaSets' statuses; ``Available`` is true while at least
  ``replicas - maxUnavailable`` pods are available; ``Progressing`` says
  ``NewReplicaSetAvailable`` once the rollout is complete and ``ReplicaSetUpdated`` before.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec

from shared.kube.resources import DEPLOYMENTS
from sim.controllers.objects import (
    POD_TEMPLATE_HASH_LABEL,
    REVISION_ANNOTATION,
    Deployment,
    DeploymentStatus,
    ReplicaSet,
    WorkloadCondition,
    controller_reference,
    set_condition,
)

_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193
_encode_sorted = msgspec.json.Encoder(order="sorted")


def _fnv1a_32(data: bytes) -> int:
    value = _FNV_OFFSET
    for byte in data:
        value = ((value ^ byte) * _FNV_PRIME) & 0xFFFFFFFF
    return value


def template_hash(template: dict[str, Any], collision_count: int | None) -> str:
    """The ``pod-template-hash`` of a template (and collision count)."""
    data = _encode_sorted.encode(template)
    if collision_count:
        data += b"/" + str(collision_count).encode()
    return "".join(_SAFE_ALPHABET[ord(ch) % len(_SAFE_ALPHABET)] for ch in str(_fnv1a_32(data)))


def without_hash(template: dict[str, Any]) -> dict[str, Any]:
    """``template`` minus the ``pod-template-hash`` label."""
    labels = (template.get("metadata") or {}).get("labels")
    if not labels or POD_TEMPLATE_HASH_LABEL not in labels:
        return template
    stripped = copy.deepcopy(template)
    del stripped["metadata"]["labels"][POD_TEMPLATE_HASH_LABEL]
    return stripped


def is_new(rs: ReplicaSet, deployment: Deployment) -> bool:
    return without_hash(rs.spec.template) == deployment.spec.template


def by_age(replica_sets: Sequence[ReplicaSet]) -> list[ReplicaSet]:
    def age(rs: ReplicaSet) -> tuple[float, str]:
        created = rs.metadata.creation_timestamp
        return (created.timestamp() if created else 0.0, rs.metadata.name)

    return sorted(replica_sets, key=age)


def split(
    deployment: Deployment, replica_sets: Sequence[ReplicaSet]
) -> tuple[ReplicaSet | None, list[ReplicaSet]]:
    """(the new ReplicaSet or None, the old ones oldest first)."""
    ordered = by_age(replica_sets)
    new = next((rs for rs in ordered if is_new(rs, deployment)), None)
    return new, [rs for rs in ordered if rs is not new]


def _scaled(value: int | str | None, total: int, *, default: str, round_up: bool) -> int:
    value = default if value is None else value
    if isinstance(value, int):
        return value
    if value.endswith("%") and value[:-1].isdigit():
        exact = total * int(value[:-1]) / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return int(value) if value.isdigit() else 0


def surge_and_unavailable(deployment: Deployment) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) in pods; (0, 0) for Recreate."""
    strategy = deployment.spec.strategy
    if strategy.type != "RollingUpdate":
        return 0, 0
    desired = deployment.spec.replicas
    rolling = strategy.rolling_update
    surge = _scaled(rolling.max_surge if rolling else None, desired, default="25%", round_up=True)
    unavailable = _scaled(
        rolling.max_unavailable if rolling else None, desired, default="25%", round_up=False
    )
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, min(unavailable, desired)


@dataclass(frozen=True)
class RolloutPlan:
    """``new_replicas``: what the new ReplicaSet should have (None: leave or do not create it
    yet); ``old_replicas``: new ``spec.replicas`` of old ReplicaSets by name."""

    new_replicas: int | None = None
    old_replicas: dict[str, int] = field(default_factory=dict)


def rolling_plan(
    deployment: Deployment, new: ReplicaSet | None, old: Sequence[ReplicaSet]
) -> RolloutPlan:
    """One step of a rolling update (``old`` oldest first)."""
    desired = deployment.spec.replicas
    surge, unavailable = surge_and_unavailable(deployment)
    new_spec = new.spec.replicas if new is not None else 0
    all_spec = new_spec + sum(rs.spec.replicas for rs in old)
    if new_spec > desired:
        target = desired
    elif new_spec < desired:
        room = desired + surge - all_spec
        target = new_spec + max(0, min(room, desired - new_spec))
    else:
        target = new_spec
    if new is not None and target != new_spec:
        return RolloutPlan(new_replicas=target)  # the old ones wait for the next look
    all_spec += target - new_spec
    old_targets = _shrink_old(
        desired=desired,
        unavailable=unavailable,
        all_spec=all_spec,
        new_unavailable=target - (new.status.available_replicas if new is not None else 0),
        available=sum(rs.status.available_replicas for rs in old)
        + (new.status.available_replicas if new is not None else 0),
        old=old,
    )
    return RolloutPlan(new_replicas=target, old_replicas=old_targets)


def _shrink_old(
    *,
    desired: int,
    unavailable: int,
    all_spec: int,
    new_unavailable: int,
    available: int,
    old: Sequence[ReplicaSet],
) -> dict[str, int]:
    if sum(rs.spec.replicas for rs in old) == 0:
        return {}
    min_available = desired - unavailable
    budget = all_spec - min_available - new_unavailable
    if budget <= 0:
        return {}
    targets = {rs.metadata.name: rs.spec.replicas for rs in old}
    # First the old pods that are not available anyway: losing them costs no availability.
    cleaned = 0
    for rs in old:
        if cleaned >= budget:
            break
        unhealthy = rs.spec.replicas - rs.status.available_replicas
        if rs.spec.replicas == 0 or unhealthy <= 0:
            continue
        step = min(budget - cleaned, unhealthy)
        targets[rs.metadata.name] -= step
        cleaned += step
    # Then available ones, as far as the availability floor allows.
    if available > min_available:
        allowed = available - min_available
        taken = 0
        for rs in old:
            if taken >= allowed:
                break
            current = targets[rs.metadata.name]
            if current == 0:
                continue
            step = min(current, allowed - taken)
            targets[rs.metadata.name] = current - step
            taken += step
    return {name: n for name, n in targets.items() if n != _spec_of(old, name)}


def _spec_of(old: Sequence[ReplicaSet], name: str) -> int:
    return next(rs.spec.replicas for rs in old if rs.metadata.name == name)


def recreate_plan(
    deployment: Deployment,
    new: ReplicaSet | None,
    old: Sequence[ReplicaSet],
    *,
    old_pods_running: bool,
) -> RolloutPlan:
    """One step of a Recreate rollout."""
    shrink = {rs.metadata.name: 0 for rs in old if rs.spec.replicas > 0}
    if shrink:
        return RolloutPlan(old_replicas=shrink)
    if old_pods_running:
        return RolloutPlan()
    return RolloutPlan(new_replicas=deployment.spec.replicas)


def replica_set_body(
    deployment: Deployment, *, pod_hash: str, replicas: int, revision: int
) -> dict[str, Any]:
    """The new ReplicaSet for the Deployment's current template."""
    template = copy.deepcopy(deployment.spec.template)
    template_meta = template.setdefault("metadata", {})
    labels = dict(template_meta.get("labels") or {})
    labels[POD_TEMPLATE_HASH_LABEL] = pod_hash
    template_meta["labels"] = labels
    selector = copy.deepcopy(deployment.spec.selector)
    selector["matchLabels"] = dict(selector.get("matchLabels") or {}) | {
        POD_TEMPLATE_HASH_LABEL: pod_hash
    }
    prefix = deployment.metadata.name[: 253 - len(pod_hash) - 1]
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": f"{prefix}-{pod_hash}",
            "namespace": deployment.metadata.namespace,
            "labels": labels,
            "annotations": {REVISION_ANNOTATION: str(revision)},
            "ownerReferences": [controller_reference(DEPLOYMENTS, deployment)],
        },
        "spec": {
            "replicas": replicas,
            "minReadySeconds": deployment.spec.min_ready_seconds,
            "selector": selector,
            "template": template,
        },
    }


def next_revision(old: Sequence[ReplicaSet]) -> int:
    return max((rs.revision for rs in old), default=0) + 1


def history_to_delete(deployment: Deployment, old: Sequence[ReplicaSet]) -> list[ReplicaSet]:
    """Old, empty ReplicaSets beyond ``revisionHistoryLimit``, lowest revision first."""
    limit = deployment.spec.revision_history_limit
    if limit is None:
        return []
    empty = [
        rs
        for rs in old
        if rs.spec.replicas == 0
        and rs.status.replicas == 0
        and rs.status.observed_generation >= rs.metadata.generation
        and rs.metadata.deletion_timestamp is None
    ]
    excess = len(empty) - limit
    if excess <= 0:
        return []
    return sorted(empty, key=lambda rs: (rs.revision, rs.metadata.name))[:excess]


def deployment_status(
    deployment: Deployment,
    new: ReplicaSet | None,
    replica_sets: Sequence[ReplicaSet],
    *,
    now: datetime,
    collision_count: int | None,
) -> DeploymentStatus:
    """The status the ReplicaSets justify (``replica_sets`` includes ``new``)."""
    desired = deployment.spec.replicas
    _, unavailable_allowed = surge_and_unavailable(deployment)
    replicas = sum(rs.status.replicas for rs in replica_sets)
    available = sum(rs.status.available_replicas for rs in replica_sets)
    status = DeploymentStatus(
        observed_generation=deployment.metadata.generation,
        replicas=replicas,
        updated_replicas=new.status.replicas if new is not None else 0,
        ready_replicas=sum(rs.status.ready_replicas for rs in replica_sets),
        available_replicas=available,
        unavailable_replicas=max(0, sum(rs.spec.replicas for rs in replica_sets) - available),
        collision_count=collision_count,
    )
    conditions = deployment.status.conditions
    if available >= desired - unavailable_allowed:
        available_condition = WorkloadCondition(
            type="Available",
            status="True",
            reason="MinimumReplicasAvailable",
            message="Deployment has minimum availability.",
        )
    else:
        available_condition = WorkloadCondition(
            type="Available",
            status="False",
            reason="MinimumReplicasUnavailable",
            message="Deployment does not have minimum availability.",
        )
    conditions = set_condition(conditions, available_condition, now=now, update_time=True)
    progressing: WorkloadCondition | None = None
    if deployment.spec.paused:
        progressing = WorkloadCondition(
            type="Progressing",
            status="Unknown",
            reason="DeploymentPaused",
            message="Deployment is paused",
        )
    elif new is not None:
        complete = (
            status.updated_replicas == desired and replicas == desired and available == desired
        )
        progressing = WorkloadCondition(
            type="Progressing",
            status="True",
            reason="NewReplicaSetAvailable" if complete else "ReplicaSetUpdated",
            message=(
                f'ReplicaSet "{new.metadata.name}" has successfully progressed.'
                if complete
                else f'ReplicaSet "{new.metadata.name}" is progressing.'
            ),
        )
    if progressing is not None:
        conditions = set_condition(conditions, progressing, now=now, update_time=True)
    return msgspec.structs.replace(status, conditions=conditions)
