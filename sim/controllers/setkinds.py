"""Structs of the JobSet and LeaderWorkerSet objects the simulated controllers read.

As in :mod:`sim.controllers.objects`, templates stay raw JSON: they are copied into the Jobs and
StatefulSets made from them, never interpreted field by field. Statuses are written with
:func:`sim.controllers.objects.status_patch`. Conditions are ``metav1.Condition``s (type, status,
reason, message, lastTransitionTime, observedGeneration).
"""

from __future__ import annotations

from typing import Any

import msgspec

from shared.kube.meta import KubeObject


class _Camel(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    pass


class SetCondition(_Camel, frozen=True, kw_only=True):
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None
    observed_generation: int = 0


# -- JobSet -------------------------------------------------------------------------------------


class ReplicatedJob(_Camel, frozen=True, kw_only=True):
    name: str
    replicas: int = 1
    template: dict[str, Any] = msgspec.field(default_factory=dict)


class JobSetNetwork(_Camel, frozen=True, kw_only=True):
    enable_dns_hostnames: bool | None = msgspec.field(default=None, name="enableDNSHostnames")
    subdomain: str = ""


class JobSetSuccessPolicy(_Camel, frozen=True, kw_only=True):
    operator: str = "All"
    target_replicated_jobs: tuple[str, ...] = ()


class JobSetFailurePolicy(_Camel, frozen=True, kw_only=True):
    max_restarts: int = 0


class JobSetSpec(_Camel, frozen=True, kw_only=True):
    replicated_jobs: tuple[ReplicatedJob, ...] = ()
    network: JobSetNetwork | None = None
    success_policy: JobSetSuccessPolicy | None = None
    failure_policy: JobSetFailurePolicy | None = None
    suspend: bool = False


class ReplicatedJobStatus(_Camel, frozen=True, kw_only=True):
    name: str
    ready: int = 0
    succeeded: int = 0
    failed: int = 0
    active: int = 0
    suspended: int = 0


class JobSetStatus(_Camel, frozen=True, kw_only=True):
    conditions: tuple[SetCondition, ...] = ()
    restarts: int = 0
    restarts_count_towards_max: int = 0
    terminal_state: str = ""
    replicated_jobs_status: tuple[ReplicatedJobStatus, ...] = ()


class JobSet(KubeObject, frozen=True, kw_only=True):
    spec: JobSetSpec = msgspec.field(default_factory=JobSetSpec)
    status: JobSetStatus = msgspec.field(default_factory=JobSetStatus)


# -- LeaderWorkerSet ----------------------------------------------------------------------------


class LeaderWorkerTemplate(_Camel, frozen=True, kw_only=True):
    size: int = 1
    leader_template: dict[str, Any] | None = None
    worker_template: dict[str, Any] = msgspec.field(default_factory=dict)
    restart_policy: str = "RecreateGroupOnPodRestart"


class LeaderWorkerSetSpec(_Camel, frozen=True, kw_only=True):
    replicas: int = 1
    leader_worker_template: LeaderWorkerTemplate = msgspec.field(
        default_factory=LeaderWorkerTemplate
    )
    startup_policy: str = "LeaderCreated"


class LeaderWorkerSetStatus(_Camel, frozen=True, kw_only=True):
    conditions: tuple[SetCondition, ...] = ()
    ready_replicas: int = 0
    updated_replicas: int = 0
    replicas: int = 0
    hpa_pod_selector: str = ""
    observed_generation: int = 0


class LeaderWorkerSet(KubeObject, frozen=True, kw_only=True):
    spec: LeaderWorkerSetSpec = msgspec.field(default_factory=LeaderWorkerSetSpec)
    status: LeaderWorkerSetStatus = msgspec.field(default_factory=LeaderWorkerSetStatus)


def set_condition(
    conditions: tuple[SetCondition, ...], new: SetCondition, *, now: str
) -> tuple[SetCondition, ...]:
    """``conditions`` with ``new`` in place of its type; the transition time moves only when the
    status does."""
    old = next((c for c in conditions if c.type == new.type), None)
    if old is not None and old.status == new.status:
        stamped = msgspec.structs.replace(new, last_transition_time=old.last_transition_time)
    else:
        stamped = msgspec.structs.replace(new, last_transition_time=now)
    if old is None:
        return (*conditions, stamped)
    return tuple(stamped if c.type == new.type else c for c in conditions)


def condition_true(conditions: tuple[SetCondition, ...], kind: str) -> bool:
    return any(c.type == kind and c.status == "True" for c in conditions)
