"""Job controller: run pods until ``completions`` of them succeed, ``parallelism`` at a time.

Desired state (pure, :func:`plan_job`), from the Job's pods (controller ownerReference with its
uid) in the cache and this controller's outstanding writes:

- ``NonIndexed``: keep ``min(parallelism, completions - succeeded)`` pods active; without
  ``completions`` keep ``parallelism`` until one succeeds, then start no more and finish when
  none is active. ``Indexed``: one active pod per index not yet completed, lowest first, at
  most ``parallelism``; pods carry the ``batch.kubernetes.io/job-completion-index`` annotation
  and label, hostname ``<job>-<index>`` and ``JOB_COMPLETION_INDEX``; ``status.completedIndexes``
  lists the finished ones (``"0-2,4"``).
- A pod succeeds or fails when its phase says so (the kubelet sets it). Failed pods are replaced
  at once; once more than ``backoffLimit`` pods have failed the Job fails.
- Finishing: the first condition says the outcome is decided (``SuccessCriteriaMet`` or
  ``FailureTarget``) and the remaining active pods are deleted; once no pod is left running the
  terminal condition follows (``Complete`` with ``completionTime``, or ``Failed``). A finished
  Job is left alone.
- ``suspend: true`` keeps no pod active and sets ``Suspended``.
- Status: ``startTime``, ``active``, ``ready``, ``terminating``, ``succeeded``, ``failed``,
  ``completedIndexes``, ``completionTime`` and the conditions.

Counting is by the pods present: ``succeeded`` and ``failed`` never go below what status already
says, so deleting a finished pod does not undo it, but a pod that finished and was deleted before
this controller ever saw it is not counted (the real controller holds a finalizer on every pod
to count each exactly once). There is no exponential delay between failed pods and no
``activeDeadlineSeconds``, pod failure policy, success policy or TTL after finishing.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec

from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.keys import ObjectKey
from shared.kube.mapping import map_by_owner, own_key
from shared.kube.models import Pod
from shared.kube.ratelimit import RateLimitSettings
from shared.kube.reconcile import Result
from shared.kube.recorder import EventRecorder
from shared.kube.resources import JOBS
from shared.metrics import Metrics
from sim.controllers.expectations import Expectations, Outstanding
from sim.controllers.informers import BY_CONTROLLER, SharedInformers
from sim.controllers.loop import Loop
from sim.controllers.objects import (
    JOB_COMPLETION_INDEX,
    Job,
    JobStatus,
    WorkloadCondition,
    condition,
    controller_reference,
    set_condition,
    status_patch,
    timestamp,
)
from sim.controllers.podcontrol import PodControl, PodToCreate
from sim.controllers.pods import (
    deletion_order,
    is_active,
    is_ready,
    is_terminal,
    is_terminating,
    pod_from_template,
)

SUCCESS_TARGET = WorkloadCondition(
    type="SuccessCriteriaMet",
    status="True",
    reason="CompletionsReached",
    message="Reached expected number of succeeded pods",
)
COMPLETE = WorkloadCondition(
    type="Complete",
    status="True",
    reason="CompletionsReached",
    message="Reached expected number of succeeded pods",
)
FAILURE_TARGET = WorkloadCondition(
    type="FailureTarget",
    status="True",
    reason="BackoffLimitExceeded",
    message="Job has reached the specified backoff limit",
)
FAILED = WorkloadCondition(
    type="Failed",
    status="True",
    reason="BackoffLimitExceeded",
    message="Job has reached the specified backoff limit",
)


# -- completed indexes --------------------------------------------------------------------------


def parse_indexes(text: str) -> set[int]:
    """``"0-2,4"`` -> {0, 1, 2, 4}; malformed parts are skipped."""
    found: set[int] = set()
    for part in text.split(","):
        first, _, last = part.strip().partition("-")
        if first.isdigit() and (not last or last.isdigit()):
            found.update(range(int(first), int(last or first) + 1))
    return found


def format_indexes(indexes: set[int]) -> str:
    """{0, 1, 2, 4} -> ``"0-2,4"``."""
    parts: list[str] = []
    ordered = sorted(indexes)
    start = 0
    while start < len(ordered):
        end = start
        while end + 1 < len(ordered) and ordered[end + 1] == ordered[end] + 1:
            end += 1
        first, last = ordered[start], ordered[end]
        parts.append(str(first) if first == last else f"{first}-{last}")
        start = end + 1
    return ",".join(parts)


def pod_index(pod: Pod) -> int | None:
    text = pod.metadata.annotations.get(JOB_COMPLETION_INDEX) or pod.metadata.labels.get(
        JOB_COMPLETION_INDEX, ""
    )
    return int(text) if text.isdigit() else None


# -- the plan -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobPlan:
    """Pods to create (``None`` per NonIndexed pod, the index per Indexed pod), pods to delete,
    and the status to write."""

    status: JobStatus
    create: tuple[int | None, ...] = ()
    delete: tuple[Pod, ...] = field(default_factory=tuple)


def _finished(job: Job) -> bool:
    return any(
        c.status == "True" for c in job.status.conditions if c.type in ("Complete", "Failed")
    )


def plan_job(job: Job, pods: Sequence[Pod], outstanding: Outstanding, *, now: datetime) -> JobPlan:
    """Where the Job's pods and status should go next; see the module docstring."""
    if _finished(job):
        return JobPlan(status=job.status)
    spec = job.spec
    in_cache_active = [p for p in pods if is_active(p)]
    active = [p for p in in_cache_active if p.metadata.uid not in outstanding.deletes]
    running = len(in_cache_active) + sum(
        1 for p in pods if is_terminating(p) and not is_terminal(p)
    )
    failed = max(job.status.failed, sum(1 for p in pods if p.status.phase == "Failed"))
    completions = spec.completions
    done: set[int] = set()
    if job.indexed:
        done = parse_indexes(job.status.completed_indexes) | {
            index
            for p in pods
            if p.status.phase == "Succeeded" and (index := pod_index(p)) is not None
        }
        done = {i for i in done if completions is None or i < completions}
        succeeded = len(done)
    else:
        succeeded = max(job.status.succeeded, sum(1 for p in pods if p.status.phase == "Succeeded"))
    conditions = job.status.conditions
    suspended = spec.suspend
    if suspended:
        conditions = set_condition(
            conditions,
            WorkloadCondition(
                type="Suspended", status="True", reason="JobSuspended", message="Job suspended"
            ),
            now=now,
            probe_time=True,
        )
    elif (old := condition(conditions, "Suspended")) is not None and old.status == "True":
        conditions = set_condition(
            conditions,
            WorkloadCondition(
                type="Suspended", status="False", reason="JobResumed", message="Job resumed"
            ),
            now=now,
            probe_time=True,
        )
    pending = len(outstanding.creates)
    if completions is not None:
        success = succeeded >= completions
    else:
        success = succeeded > 0 and not active and pending == 0
    failure = failed > spec.backoff_limit
    status = JobStatus(
        start_time=job.status.start_time or (None if suspended else timestamp(now)),
        active=len(in_cache_active),
        ready=sum(1 for p in in_cache_active if is_ready(p)),
        terminating=running - len(in_cache_active),
        succeeded=succeeded,
        failed=failed,
        completed_indexes=format_indexes(done) if job.indexed else "",
        conditions=conditions,
    )
    if success or failure:
        target, final = (FAILURE_TARGET, FAILED) if failure else (SUCCESS_TARGET, COMPLETE)
        conditions = set_condition(conditions, target, now=now, probe_time=True)
        completion_time = None
        if running == 0 and pending == 0:
            conditions = set_condition(conditions, final, now=now, probe_time=True)
            completion_time = None if failure else timestamp(now)
        status = msgspec.structs.replace(
            status, conditions=conditions, completion_time=completion_time
        )
        return JobPlan(status=status, delete=tuple(active))
    parallelism = 0 if suspended else (spec.parallelism if spec.parallelism is not None else 1)
    if job.indexed:
        return _plan_indexed(job, status, active, outstanding, done, parallelism)
    if completions is not None:
        want = min(parallelism, completions - succeeded)
    elif succeeded > 0:
        want = min(parallelism, len(active) + pending)
    else:
        want = parallelism
    current = len(active) + pending
    if current < want:
        return JobPlan(status=status, create=(None,) * (want - current))
    if current > want:
        excess = min(current - want, len(active))
        return JobPlan(status=status, delete=tuple(deletion_order(active)[:excess]))
    return JobPlan(status=status)


def _plan_indexed(
    job: Job,
    status: JobStatus,
    active: list[Pod],
    outstanding: Outstanding,
    done: set[int],
    parallelism: int,
) -> JobPlan:
    completions = job.spec.completions or 0
    delete: list[Pod] = []
    by_index: dict[int, Pod] = {}
    # Keep the best pod of each index (the last to go on scale-down); the rest are surplus.
    for pod in reversed(deletion_order(active)):
        index = pod_index(pod)
        if index is None or index >= completions or index in done or index in by_index:
            delete.append(pod)
        else:
            by_index[index] = pod
    pending = {int(tag) for tag in outstanding.tags() if tag.isdigit()}
    busy = set(by_index) | pending
    want = min(parallelism, completions - len(done))
    if len(busy) < want:
        free = [i for i in range(completions) if i not in done and i not in busy]
        return JobPlan(status=status, create=tuple(free[: want - len(busy)]), delete=tuple(delete))
    if len(busy) > want:
        kept = deletion_order(list(by_index.values()))
        delete.extend(kept[: min(len(busy) - want, len(kept))])
    return JobPlan(status=status, delete=tuple(delete))


def pod_for(job: Job, index: int | None) -> PodToCreate:
    """The pod body for one NonIndexed pod (``index`` None) or the pod of one index."""
    owner = controller_reference(JOBS, job)
    name = job.metadata.name
    if index is None:
        body = pod_from_template(
            job.spec.template,
            generate_name=f"{name}-",
            namespace=job.metadata.namespace,
            owner_reference=owner,
        )
        return PodToCreate(body=body)
    body = pod_from_template(
        job.spec.template,
        generate_name=f"{name}-{index}-",
        namespace=job.metadata.namespace,
        owner_reference=owner,
        extra_labels={JOB_COMPLETION_INDEX: str(index)},
        extra_annotations={JOB_COMPLETION_INDEX: str(index)},
    )
    spec: dict[str, Any] = body["spec"]
    spec.setdefault("hostname", f"{name}-{index}")
    env_var = {
        "name": "JOB_COMPLETION_INDEX",
        "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{JOB_COMPLETION_INDEX}']"}},
    }
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or ():
            env = [e for e in container.get("env") or () if e.get("name") != env_var["name"]]
            container["env"] = [copy.deepcopy(env_var), *env]
    return PodToCreate(body=body, tag=str(index))


# -- the controller -----------------------------------------------------------------------------


class JobController:
    """Reconciles Jobs; see the module docstring."""

    def __init__(
        self,
        client: KubeClient,
        informers: SharedInformers,
        *,
        metrics: Metrics,
        recorder: EventRecorder | None,
        workers: int,
        expectations_ttl_s: float,
        rate_limit: RateLimitSettings,
    ) -> None:
        self._client = client
        self._recorder = recorder
        self._jobs = informers.jobs
        self._pods = informers.pods
        self._expectations = Expectations(
            cache_version=lambda: self._pods.resource_version, ttl_s=expectations_ttl_s
        )
        self._pod_control = PodControl(
            client, owner_resource=JOBS, expectations=self._expectations, recorder=recorder
        )
        self.loop = Loop(
            name="sim-job",
            reconcile=self.reconcile,
            metrics=metrics,
            workers=workers,
            rate_limit=rate_limit,
        )
        self._jobs.add_handler(self.loop.on_change(own_key))
        self._jobs.add_handler(self._forget_deleted)
        self._pods.add_handler(
            self.loop.on_change(map_by_owner(group="batch", kind="Job", controller_only=True))
        )

    def _forget_deleted(self, old: Job | None, new: Job | None) -> None:
        if new is None and old is not None:
            self._expectations.forget(old.metadata.uid)

    async def reconcile(self, key: ObjectKey) -> Result:
        job = self._jobs.cache.get(str(key))
        if job is None or job.metadata.deletion_timestamp is not None:
            return Result()
        pods = self._pods.cache.by_index(BY_CONTROLLER, job.metadata.uid)
        outstanding = self._expectations.outstanding(job.metadata.uid, pods)
        plan = plan_job(job, pods, outstanding, now=datetime.now(UTC))
        error: KubeApiError | None = None
        try:
            if plan.delete:
                await self._pod_control.delete(job, plan.delete)
            if plan.create:
                await self._pod_control.create(job, [pod_for(job, i) for i in plan.create])
        except KubeApiError as exc:
            error = exc
        if plan.status != job.status:
            try:
                await self._client.patch(
                    JOBS,
                    job.metadata.name,
                    status_patch(plan.status),
                    namespace=job.metadata.namespace,
                    subresource="status",
                )
            except KubeApiError as exc:
                if not exc.not_found:
                    raise
            await self._announce(job, plan.status)
        if error is not None:
            raise error
        return Result()

    async def _announce(self, job: Job, status: JobStatus) -> None:
        if self._recorder is None:
            return
        for final, reason, message, warning in (
            (COMPLETE, "Completed", "Job completed", False),
            (FAILED, "BackoffLimitExceeded", FAILED.message, True),
        ):
            if condition(status.conditions, final.type) and not condition(
                job.status.conditions, final.type
            ):
                await self._recorder.record(
                    JOBS,
                    job,
                    type_="Warning" if warning else "Normal",
                    reason=reason,
                    message=message,
                )
