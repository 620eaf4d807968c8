"""Structs of the workload objects the simulated controllers read, and helpers to write them.

Pod templates, label selectors and claim specs stay raw JSON (``dict[str, Any]``): the
controllers copy them into the objects they create and compare them, never interpret them
field by field, so a template survives unchanged whatever it holds.

Status Structs are declared with ``omit_defaults=True`` and written as JSON merge patches by
:func:`status_patch`, which sends every field: a value, or ``null`` for a default so that a
field the controller no longer sets disappears, as it would with the real ``omitempty`` status.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec

from shared.kube.meta import KubeObject, OwnerReference
from shared.kube.resources import Resource

POD_TEMPLATE_HASH_LABEL = "pod-template-hash"
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
DESIRED_REPLICAS_ANNOTATION = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS_ANNOTATION = "deployment.kubernetes.io/max-replicas"
JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


class _Camel(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    pass


class WorkloadCondition(_Camel, frozen=True, kw_only=True):
    """A condition of a Deployment, ReplicaSet or Job; times kept as the API's text."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_probe_time: str | None = None
    last_update_time: str | None = None
    last_transition_time: str | None = None


# -- ReplicaSet ---------------------------------------------------------------------------------


class ReplicaSetSpec(_Camel, frozen=True, kw_only=True):
    replicas: int = 1
    min_ready_seconds: int = 0
    selector: dict[str, Any] = msgspec.field(default_factory=dict)
    template: dict[str, Any] = msgspec.field(default_factory=dict)


class ReplicaSetStatus(_Camel, frozen=True, kw_only=True):
    replicas: int = 0
    fully_labeled_replicas: int = 0
    ready_replicas: int = 0
    available_replicas: int = 0
    observed_generation: int = 0
    conditions: tuple[WorkloadCondition, ...] = ()


class ReplicaSet(KubeObject, frozen=True, kw_only=True):
    spec: ReplicaSetSpec = msgspec.field(default_factory=ReplicaSetSpec)
    status: ReplicaSetStatus = msgspec.field(default_factory=ReplicaSetStatus)

    @property
    def revision(self) -> int:
        text = self.metadata.annotations.get(REVISION_ANNOTATION, "")
        return int(text) if text.isdigit() else 0


# -- Deployment ---------------------------------------------------------------------------------


class RollingUpdate(_Camel, frozen=True, kw_only=True):
    max_surge: int | str | None = None
    max_unavailable: int | str | None = None


class DeploymentStrategy(_Camel, frozen=True, kw_only=True):
    type: str = "RollingUpdate"
    rolling_update: RollingUpdate | None = None


class DeploymentSpec(_Camel, frozen=True, kw_only=True):
    replicas: int = 1
    selector: dict[str, Any] = msgspec.field(default_factory=dict)
    template: dict[str, Any] = msgspec.field(default_factory=dict)
    strategy: DeploymentStrategy = msgspec.field(default_factory=DeploymentStrategy)
    min_ready_seconds: int = 0
    revision_history_limit: int | None = 10
    paused: bool = False


class DeploymentStatus(_Camel, frozen=True, kw_only=True):
    observed_generation: int = 0
    replicas: int = 0
    updated_replicas: int = 0
    ready_replicas: int = 0
    available_replicas: int = 0
    unavailable_replicas: int = 0
    conditions: tuple[WorkloadCondition, ...] = ()
    collision_count: int | None = None


class Deployment(KubeObject, frozen=True, kw_only=True):
    spec: DeploymentSpec = msgspec.field(default_factory=DeploymentSpec)
    status: DeploymentStatus = msgspec.field(default_factory=DeploymentStatus)


# -- Job ----------------------------------------------------------------------------------------


class JobSpec(_Camel, frozen=True, kw_only=True):
    parallelism: int | None = 1
    completions: int | None = None
    backoff_limit: int = 6
    completion_mode: str = "NonIndexed"
    suspend: bool = False
    template: dict[str, Any] = msgspec.field(default_factory=dict)


class JobStatus(_Camel, frozen=True, kw_only=True):
    start_time: str | None = None
    completion_time: str | None = None
    active: int = 0
    ready: int = 0
    terminating: int = 0
    succeeded: int = 0
    failed: int = 0
    completed_indexes: str = ""
    conditions: tuple[WorkloadCondition, ...] = ()


class Job(KubeObject, frozen=True, kw_only=True):
    spec: JobSpec = msgspec.field(default_factory=JobSpec)
    status: JobStatus = msgspec.field(default_factory=JobStatus)

    @property
    def indexed(self) -> bool:
        return self.spec.completion_mode == "Indexed"


# -- StatefulSet --------------------------------------------------------------------------------


class StatefulSetOrdinals(_Camel, frozen=True, kw_only=True):
    start: int = 0


class StatefulSetSpec(_Camel, frozen=True, kw_only=True):
    replicas: int = 1
    selector: dict[str, Any] = msgspec.field(default_factory=dict)
    template: dict[str, Any] = msgspec.field(default_factory=dict)
    service_name: str = ""
    pod_management_policy: str = "OrderedReady"
    min_ready_seconds: int = 0
    ordinals: StatefulSetOrdinals = msgspec.field(default_factory=StatefulSetOrdinals)


class StatefulSetStatus(_Camel, frozen=True, kw_only=True):
    observed_generation: int = 0
    replicas: int = 0
    ready_replicas: int = 0
    current_replicas: int = 0
    updated_replicas: int = 0
    available_replicas: int = 0
    current_revision: str = ""
    update_revision: str = ""


class StatefulSet(KubeObject, frozen=True, kw_only=True):
    spec: StatefulSetSpec = msgspec.field(default_factory=StatefulSetSpec)
    status: StatefulSetStatus = msgspec.field(default_factory=StatefulSetStatus)


# -- writing ------------------------------------------------------------------------------------


def timestamp(moment: datetime) -> str:
    """The API's time format (RFC 3339, seconds, UTC)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def controller_reference(resource: Resource, owner: KubeObject) -> dict[str, Any]:
    """An ownerReference marking ``owner`` as the controller, blocking foreground deletion."""
    return {
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "name": owner.metadata.name,
        "uid": owner.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controller_of(obj: KubeObject) -> OwnerReference | None:
    return next((ref for ref in obj.metadata.owner_references if ref.controller), None)


def controller_uid(obj: KubeObject) -> list[str]:
    """Index function: the uid of the object's controller, if it has one."""
    ref = controller_of(obj)
    return [ref.uid] if ref is not None else []


def status_patch(status: msgspec.Struct) -> dict[str, Any]:
    """A merge patch that makes the object's status exactly ``status`` in the modelled fields."""
    body: dict[str, Any] = {}
    for field in msgspec.structs.fields(status):
        value = getattr(status, field.name)
        default = field.default_factory() if field.default is msgspec.NODEFAULT else field.default
        body[field.encode_name] = None if value == default else msgspec.to_builtins(value)
    return {"status": body}


def condition(conditions: tuple[WorkloadCondition, ...], kind: str) -> WorkloadCondition | None:
    return next((c for c in conditions if c.type == kind), None)


def set_condition(
    conditions: tuple[WorkloadCondition, ...],
    new: WorkloadCondition,
    *,
    now: datetime,
    update_time: bool = False,
    probe_time: bool = False,
) -> tuple[WorkloadCondition, ...]:
    """``conditions`` with ``new`` in place of the one of its type, keeping times that still hold.

    The transition time moves only when the status changes; the update (and probe) time, where
    the kind keeps one, moves when anything of the condition changes.
    """
    stamp = timestamp(now)
    old = condition(conditions, new.type)
    same = old is not None and (old.status, old.reason, old.message) == (
        new.status,
        new.reason,
        new.message,
    )
    if old is not None and same:
        return conditions
    transition = old.last_transition_time if old is not None and old.status == new.status else None
    updated = msgspec.structs.replace(
        new,
        last_transition_time=transition or stamp,
        last_update_time=stamp if update_time else None,
        last_probe_time=stamp if probe_time else None,
    )
    if old is None:
        return (*conditions, updated)
    return tuple(updated if c.type == new.type else c for c in conditions)


def remove_condition(
    conditions: tuple[WorkloadCondition, ...], kind: str
) -> tuple[WorkloadCondition, ...]:
    return tuple(c for c in conditions if c.type != kind)
