"""JobSet controller (``jobset.x-k8s.io/v1alpha2``): replicated jobs as Indexed Jobs, restarted and
finished together, as the upstream JobSet controller does.

Desired state (pure, :func:`plan_job_set`), from the JobSet's Jobs (controller ownerReference with
its uid) in the cache:

- each ``spec.replicatedJobs[r]`` makes ``replicas`` Jobs ``<jobset>-<replicatedJob>-<jobIndex>``
  from its template, ``completionMode`` defaulted to ``Indexed`` and the pod ``restartPolicy`` to
  ``OnFailure``; the Jobs and their pod templates carry, as labels and annotations,
  ``jobset.sigs.k8s.io/jobset-name``, ``jobset-uid``, ``replicatedjob-name``,
  ``replicatedjob-replicas``, ``job-index`` (within its replicated job), ``job-global-index``
  (0..N-1 over the whole JobSet, in the order of ``replicatedJobs``), ``global-replicas`` (N),
  ``job-key`` (SHA-1 of ``<namespace>/<job name>``) and ``restart-attempt`` (``status.restarts``);
  with ``network.enableDNSHostnames`` (the default) the pods' ``subdomain`` is
  ``network.subdomain`` or the JobSet's name, so a pod's hostname is
  ``<jobset>-<replicatedJob>-<jobIndex>-<podIndex>``;
- a child Job of the current attempt that failed (condition ``Failed``) restarts the JobSet while
  ``status.restartsCountTowardsMax`` < ``failurePolicy.maxRestarts``: ``restarts`` and
  ``restartsCountTowardsMax`` go up by one, every Job of an earlier attempt is deleted (foreground,
  so its pods go first) and made again with the new ``restart-attempt``; past the limit (or
  without a ``failurePolicy``) the JobSet fails: ``Failed`` (``ReachedMaxRestarts`` or
  ``FailedJobs``), ``terminalState: Failed``, and its active Jobs are deleted;
- success (``successPolicy``, default operator ``All`` over every replicated job): every Job of
  the targeted replicated jobs completed (``All``) or any one (``Any``) gives ``Completed``
  (``AllJobsCompleted``) and ``terminalState: Completed``; the remaining active Jobs are deleted;
- status: ``replicatedJobsStatus`` per replicated job (``ready``: Jobs whose ready and succeeded
  pods reach ``min(parallelism, completions)``; ``succeeded``, ``failed``, ``active``,
  ``suspended``), ``restarts``, ``restartsCountTowardsMax``, ``terminalState``, conditions.

Not simulated: the headless Service for the pods' DNS names, failure policy ``rules``,
``RecreateJob``, ``startupPolicy``/``dependsOn`` (all Jobs start at once), ``suspend``,
``coordinator``, exclusive topology placement, ``ttlSecondsAfterFinished`` and ``managedBy``.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec

from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.keys import ObjectKey
from shared.kube.mapping import map_by_owner, own_key
from shared.kube.ratelimit import RateLimitSettings
from shared.kube.reconcile import Result
from shared.kube.resources import JOB_SETS, JOBS
from shared.metrics import Metrics
from sim.controllers.expectations import Expectations
from sim.controllers.informers import BY_CONTROLLER, SharedInformers
from sim.controllers.loop import Loop
from sim.controllers.objects import Job, condition, controller_reference, status_patch, timestamp
from sim.controllers.setkinds import (
    JobSet,
    JobSetStatus,
    ReplicatedJobStatus,
    SetCondition,
    condition_true,
    set_condition,
)

PREFIX = "jobset.sigs.k8s.io/"
JOBSET_NAME = PREFIX + "jobset-name"
JOBSET_UID = PREFIX + "jobset-uid"
REPLICATED_JOB_NAME = PREFIX + "replicatedjob-name"
REPLICATED_JOB_REPLICAS = PREFIX + "replicatedjob-replicas"
JOB_INDEX = PREFIX + "job-index"
JOB_GLOBAL_INDEX = PREFIX + "job-global-index"
GLOBAL_REPLICAS = PREFIX + "global-replicas"
JOB_KEY = PREFIX + "job-key"
RESTART_ATTEMPT = PREFIX + "restart-attempt"

COMPLETED = "Completed"
FAILED = "Failed"


def job_key(namespace: str, job_name: str) -> str:
    return hashlib.sha1(f"{namespace}/{job_name}".encode()).hexdigest()


def _job_finished(job: Job, kind: str) -> bool:
    found = condition(job.status.conditions, kind)
    return found is not None and found.status == "True"


def attempt_of(job: Job) -> int:
    text = job.metadata.labels.get(RESTART_ATTEMPT, "")
    return int(text) if text.isdigit() else 0


@dataclass(frozen=True)
class ChildJob:
    """One Job the JobSet wants: its name and body."""

    name: str
    replicated_job: str
    body: dict[str, Any]


def child_jobs(js: JobSet, *, restarts: int) -> list[ChildJob]:
    """Every Job of the JobSet's attempt ``restarts``, in global-index order."""
    meta = js.metadata
    total = sum(max(0, rj.replicas) for rj in js.spec.replicated_jobs)
    network = js.spec.network
    dns = network is None or network.enable_dns_hostnames is not False
    subdomain = (network.subdomain if network is not None else "") or meta.name
    out: list[ChildJob] = []
    global_index = 0
    for rj in js.spec.replicated_jobs:
        for index in range(max(0, rj.replicas)):
            name = f"{meta.name}-{rj.name}-{index}"
            marks = {
                JOBSET_NAME: meta.name,
                JOBSET_UID: meta.uid,
                REPLICATED_JOB_NAME: rj.name,
                REPLICATED_JOB_REPLICAS: str(rj.replicas),
                JOB_INDEX: str(index),
                JOB_GLOBAL_INDEX: str(global_index),
                GLOBAL_REPLICAS: str(total),
                JOB_KEY: job_key(meta.namespace, name),
                RESTART_ATTEMPT: str(restarts),
            }
            template = copy.deepcopy(rj.template)
            job_meta: dict[str, Any] = template.get("metadata") or {}
            spec: dict[str, Any] = template.get("spec") or {}
            spec.setdefault("completionMode", "Indexed")
            pod_template: dict[str, Any] = spec.setdefault("template", {})
            pod_meta: dict[str, Any] = pod_template.setdefault("metadata", {})
            pod_spec: dict[str, Any] = pod_template.setdefault("spec", {})
            pod_spec.setdefault("restartPolicy", "OnFailure")
            if dns:
                pod_spec.setdefault("subdomain", subdomain)
            for target in (job_meta, pod_meta):
                target["labels"] = dict(target.get("labels") or {}) | marks
                target["annotations"] = dict(target.get("annotations") or {}) | marks
            body = {
                "apiVersion": JOBS.api_version,
                "kind": JOBS.kind,
                "metadata": {
                    **job_meta,
                    "name": name,
                    "namespace": meta.namespace,
                    "ownerReferences": [controller_reference(JOB_SETS, js)],
                },
                "spec": spec,
            }
            out.append(ChildJob(name=name, replicated_job=rj.name, body=body))
            global_index += 1
    return out


def _wanted_pods(job: Job) -> int:
    parallelism = 1 if job.spec.parallelism is None else job.spec.parallelism
    completions = job.spec.completions
    return parallelism if completions is None else min(parallelism, completions)


def replicated_jobs_status(js: JobSet, jobs: Sequence[Job]) -> tuple[ReplicatedJobStatus, ...]:
    by_name: dict[str, list[Job]] = {}
    for job in jobs:
        by_name.setdefault(job.metadata.labels.get(REPLICATED_JOB_NAME, ""), []).append(job)
    out: list[ReplicatedJobStatus] = []
    for rj in js.spec.replicated_jobs:
        mine = by_name.get(rj.name, [])
        succeeded = [j for j in mine if _job_finished(j, "Complete")]
        failed = [j for j in mine if _job_finished(j, FAILED)]
        running = [j for j in mine if j not in succeeded and j not in failed]
        out.append(
            ReplicatedJobStatus(
                name=rj.name,
                ready=sum(
                    1 for j in running if j.status.ready + j.status.succeeded >= _wanted_pods(j)
                ),
                succeeded=len(succeeded),
                failed=len(failed),
                active=sum(1 for j in running if j.status.active > 0),
                suspended=sum(1 for j in running if j.spec.suspend),
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class JobSetPlan:
    status: JobSetStatus
    create: tuple[ChildJob, ...] = ()
    delete: tuple[Job, ...] = ()


def _succeeded(js: JobSet, jobs: Sequence[Job]) -> bool:
    policy = js.spec.success_policy
    targets = set(policy.target_replicated_jobs) if policy is not None else set()
    any_of = policy is not None and policy.operator == "Any"
    wanted = [rj for rj in js.spec.replicated_jobs if not targets or rj.name in targets]
    complete = {j.metadata.name for j in jobs if _job_finished(j, "Complete")}
    names = [f"{js.metadata.name}-{rj.name}-{i}" for rj in wanted for i in range(rj.replicas)]
    if any_of:
        return any(name in complete for name in names)
    return all(name in complete for name in names)


def plan_job_set(
    js: JobSet, jobs: Sequence[Job], *, pending: set[str], restarts_floor: int, now: datetime
) -> JobSetPlan:
    """Where the JobSet's Jobs and status go next; see the module docstring.

    ``pending``: names of Jobs created but not in the cache yet. ``restarts_floor``: the restart
    count this controller wrote last (the JobSet in the cache may not show it yet).
    """
    status = js.status
    stamp = timestamp(now)
    restarts = max(status.restarts, restarts_floor)
    towards_max = status.restarts_count_towards_max + (restarts - status.restarts)
    live = [j for j in jobs if j.metadata.deletion_timestamp is None]
    current = [j for j in live if attempt_of(j) == restarts]
    active = [j for j in live if not _job_finished(j, "Complete") and not _job_finished(j, FAILED)]
    finished = condition_true(status.conditions, COMPLETED) or condition_true(
        status.conditions, FAILED
    )
    if finished:
        return JobSetPlan(
            status=msgspec.structs.replace(
                status, replicated_jobs_status=replicated_jobs_status(js, current)
            ),
            delete=tuple(active),
        )
    conditions = status.conditions
    failed = [j for j in current if _job_finished(j, FAILED)]
    if failed:
        policy = js.spec.failure_policy
        if policy is not None and towards_max < policy.max_restarts:
            restarts += 1
            towards_max += 1
        else:
            reason, message = (
                ("ReachedMaxRestarts", "jobset failed due to reaching max number of restarts")
                if policy is not None
                else ("FailedJobs", "jobset failed due to one or more job failures")
            )
            conditions = set_condition(
                conditions,
                SetCondition(
                    type=FAILED,
                    status="True",
                    reason=reason,
                    message=message,
                    observed_generation=js.metadata.generation,
                ),
                now=stamp,
            )
            return JobSetPlan(
                status=JobSetStatus(
                    conditions=conditions,
                    restarts=restarts,
                    restarts_count_towards_max=towards_max,
                    terminal_state=FAILED,
                    replicated_jobs_status=replicated_jobs_status(js, current),
                ),
                delete=tuple(active),
            )
    elif _succeeded(js, current):
        conditions = set_condition(
            conditions,
            SetCondition(
                type=COMPLETED,
                status="True",
                reason="AllJobsCompleted",
                message="jobset completed successfully",
                observed_generation=js.metadata.generation,
            ),
            now=stamp,
        )
        return JobSetPlan(
            status=JobSetStatus(
                conditions=conditions,
                restarts=restarts,
                restarts_count_towards_max=towards_max,
                terminal_state=COMPLETED,
                replicated_jobs_status=replicated_jobs_status(js, current),
            ),
            delete=tuple(j for j in active if attempt_of(j) == restarts),
        )
    stale = tuple(j for j in live if attempt_of(j) < restarts)
    present = {j.metadata.name for j in jobs}
    create = tuple(
        child
        for child in child_jobs(js, restarts=restarts)
        if child.name not in present and child.name not in pending
    )
    new_status = JobSetStatus(
        conditions=conditions,
        restarts=restarts,
        restarts_count_towards_max=towards_max,
        replicated_jobs_status=replicated_jobs_status(
            js, [j for j in current if attempt_of(j) == restarts]
        ),
    )
    # A restart is recorded before its Jobs go (a restart lost half-way would not be counted).
    if restarts != status.restarts:
        return JobSetPlan(status=new_status, delete=stale)
    return JobSetPlan(status=new_status, create=create, delete=stale)


class JobSetController:
    """Reconciles JobSets; see the module docstring."""

    def __init__(
        self,
        client: KubeClient,
        informers: SharedInformers,
        *,
        metrics: Metrics,
        workers: int,
        expectations_ttl_s: float,
        rate_limit: RateLimitSettings,
    ) -> None:
        self._client = client
        self._job_sets = informers.job_sets
        self._jobs = informers.jobs
        self._expectations = Expectations(
            cache_version=lambda: self._jobs.resource_version, ttl_s=expectations_ttl_s
        )
        self._restarts: dict[str, int] = {}
        self.loop = Loop(
            name="sim-jobset",
            reconcile=self.reconcile,
            metrics=metrics,
            workers=workers,
            rate_limit=rate_limit,
        )
        self._job_sets.add_handler(self.loop.on_change(own_key))
        self._job_sets.add_handler(self._forget_deleted)
        self._jobs.add_handler(
            self.loop.on_change(
                map_by_owner(group=JOB_SETS.group, kind="JobSet", controller_only=True)
            )
        )

    def _forget_deleted(self, old: JobSet | None, new: JobSet | None) -> None:
        if new is None and old is not None:
            self._expectations.forget(old.metadata.uid)
            self._restarts.pop(old.metadata.uid, None)

    async def reconcile(self, key: ObjectKey) -> Result:
        js = self._job_sets.cache.get(str(key))
        if js is None or js.metadata.deletion_timestamp is not None:
            return Result()
        uid = js.metadata.uid
        jobs = self._jobs.cache.by_index(BY_CONTROLLER, uid)
        outstanding = self._expectations.outstanding(uid, jobs)
        plan = plan_job_set(
            js,
            jobs,
            pending={create.name for create in outstanding.creates},
            restarts_floor=self._restarts.get(uid, 0),
            now=datetime.now(UTC),
        )
        namespace = js.metadata.namespace
        if plan.status != js.status:
            patch = status_patch(plan.status)
            if plan.status.restarts != js.status.restarts:
                # Guarded: a restart counted from a stale JobSet is counted again, not twice.
                patch["metadata"] = {"resourceVersion": js.metadata.resource_version}
            try:
                await self._client.patch(
                    JOB_SETS, js.metadata.name, patch, namespace=namespace, subresource="status"
                )
            except KubeApiError as exc:
                if exc.not_found:
                    return Result()
                raise
            self._restarts[uid] = plan.status.restarts
        for job in plan.delete:
            try:
                await self._client.delete(
                    JOBS,
                    job.metadata.name,
                    namespace=namespace,
                    uid=job.metadata.uid,
                    propagation="Foreground",
                )
            except KubeApiError as exc:
                if not exc.conflict:  # a conflict: that Job is gone already
                    raise
        for child in plan.create:
            try:
                raw = await self._client.create(JOBS, child.body, namespace=namespace)
            except KubeApiError as exc:
                if exc.already_exists:
                    continue
                raise
            self._expectations.created(uid, msgspec.json.decode(raw, type=Job))
        return Result()
