"""How big a domain's gang is, and how many GPUs each of its pods takes (pure functions).

The gang is what the allocator reserves in one go:

- ``spec.gang.size`` of the ComputeDomain when set;
- otherwise the pods the domain's workloads want: for each controlling owner of the domain's
  live pods, a ReplicaSet's or StatefulSet's ``spec.replicas`` (a Deployment's pods belong to its
  ReplicaSets, so a rolling update counts the old and the new one, surge included), a Job's
  ``spec.parallelism``, capped by the completions still missing; a pod of a JobSet's Job counts
  its JobSet instead: every Job of the JobSet's current attempt whose pods use the domain
  (``jobset.sigs.k8s.io/global-replicas`` says how many Jobs to wait for); a pod with no owner at
  all counts as one.

A workload the cache does not show yet makes the size unknown: the allocator waits rather than
reserve a wrong amount. A pod controlled by a kind cdo cannot size (not one of the above) makes
the size **undeclared**: its pods are held with ``GangSizeUndeclared`` until the domain says
``spec.gang.size``. The units of a gang (``units.py``) are sized there.

GPUs per pod are what each pod asks for in all: its ``nvidia.com/gpu``
requests (limits win, as for every extended resource) plus the GPUs its claims ask of NVIDIA's
GPU DRA driver (``dragpus.py``); a gang may mix both ways, but its pods must agree in number.

Pods that ask for no GPU, only the domain's channel (``planning/channelonly.py``), are not part
of what is reserved: the gang the allocator reserves GPU slots for is sized over the pods that
take GPUs (a JobSet's Jobs whose pods take none left out, ``skip_jobs``), or, with
``spec.gang.size``, is that size less the domain's live pods without GPUs
(:func:`less_channel_only`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import msgspec

from services.clique_allocator.objects import Workload, controller_of, makes_pods_using
from shared.crds.names import GPU_RESOURCE
from shared.kube.models import Pod

REPLICATED_KINDS = frozenset({"ReplicaSet", "StatefulSet"})
JOB_KIND = "Job"
WORKLOAD_KINDS = REPLICATED_KINDS | {JOB_KIND}
GANG_SIZE_UNDECLARED = "GangSizeUndeclared"

JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
JOBSET_GLOBAL_REPLICAS = "jobset.sigs.k8s.io/global-replicas"
JOBSET_RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"


class GangSize(msgspec.Struct, frozen=True, kw_only=True):
    """Pods in the gang, and where the number comes from (for messages)."""

    pods: int
    source: str


class UnknownSize(msgspec.Struct, frozen=True, kw_only=True):
    """The size cannot be told yet (a workload is not in the cache)."""

    message: str


class UndeclaredSize(msgspec.Struct, frozen=True, kw_only=True):
    """A pod's controller is a kind cdo cannot size: the domain must declare the size."""

    message: str


WorkloadLookup = Callable[[str, str, str], Workload | None]
"""(kind, namespace, name) -> the workload from the cache, or None."""

JobSetJobs = Callable[[str, str], Sequence[Workload]]
"""(namespace, JobSet name) -> the JobSet's Jobs in the cache."""


def no_jobsets(namespace: str, name: str) -> Sequence[Workload]:
    return ()


def workload_pods(kind: str, workload: Workload) -> int:
    """Pods a workload wants at once."""
    spec = workload.spec
    if kind == JOB_KIND:
        parallel = 1 if spec.parallelism is None else spec.parallelism
        if spec.completions is not None:
            parallel = min(parallel, max(0, spec.completions - workload.status.succeeded))
        return max(0, parallel)
    return max(0, 1 if spec.replicas is None else spec.replicas)


def gang_size(
    *,
    explicit: int | None,
    pods: Iterable[Pod],
    workload: WorkloadLookup,
    template: str = "",
    jobset_jobs: JobSetJobs = no_jobsets,
    skip_jobs: frozenset[str] = frozenset(),
) -> GangSize | UnknownSize | UndeclaredSize:
    """The gang's size; ``pods`` are the domain's live pods, made from the claim template
    ``template`` (see the module docstring); a JobSet counts none of the Jobs whose uids
    ``skip_jobs`` lists."""
    if explicit is not None:
        return GangSize(pods=explicit, source="spec.gang.size")
    total = 0
    sources: list[str] = []
    seen: set[str] = set()
    loose = 0
    for pod in pods:
        owner = controller_of(pod)
        if owner is None:
            loose += 1
            continue
        if owner.kind not in WORKLOAD_KINDS:
            return UndeclaredSize(message=undeclared(pod, owner.kind, owner.name))
        jobset = pod.metadata.labels.get(JOBSET_NAME) if owner.kind == JOB_KIND else None
        if jobset is not None:
            if f"JobSet/{jobset}" in seen:
                continue
            seen.add(f"JobSet/{jobset}")
            counted = _jobset_pods(pod, jobset, jobset_jobs, template, skip_jobs)
            if isinstance(counted, UnknownSize):
                return counted
            total += counted
            sources.append(f"JobSet {jobset}: {counted}")
            continue
        if owner.uid in seen:
            continue
        seen.add(owner.uid)
        found = workload(owner.kind, pod.metadata.namespace, owner.name)
        if found is None or found.metadata.uid != owner.uid:
            return UnknownSize(message=f"waiting to see {owner.kind} {owner.name}")
        wanted = workload_pods(owner.kind, found)
        total += wanted
        sources.append(f"{owner.kind} {owner.name}: {wanted}")
    if loose:
        sources.append(f"{loose} pod{'' if loose == 1 else 's'} without a workload")
    return GangSize(pods=total + loose, source=", ".join(sorted(sources)))


def undeclared(pod: Pod, kind: str, name: str) -> str:
    """Why the size cannot be told, and how to declare it."""
    return (
        f"pod {pod.metadata.name} is controlled by {kind} {name}, a kind whose gang size cdo "
        "cannot read (it sizes ReplicaSets, StatefulSets, Jobs, JobSets and LeaderWorkerSets); "
        "set spec.gang.size on the ComputeDomain to the number of pods to place together, and "
        "spec.gang.unitLabel to place groups of them independently"
    )


def _jobset_pods(
    pod: Pod, jobset: str, jobset_jobs: JobSetJobs, template: str, skip: frozenset[str]
) -> int | UnknownSize:
    """Pods the JobSet's current attempt wants at once, over its Jobs that use the domain (but
    those in ``skip``)."""
    labels = pod.metadata.labels
    attempt = labels.get(JOBSET_RESTART_ATTEMPT, "")
    jobs = [
        job
        for job in jobset_jobs(pod.metadata.namespace, jobset)
        if job.metadata.labels.get(JOBSET_RESTART_ATTEMPT, "") == attempt
    ]
    wanted = labels.get(JOBSET_GLOBAL_REPLICAS, "")
    if not wanted.isdigit() or len(jobs) < int(wanted):
        return UnknownSize(
            message=f"waiting to see the {wanted or 'missing'} Jobs of JobSet {jobset}"
        )
    return sum(
        workload_pods(JOB_KIND, job)
        for job in jobs
        if makes_pods_using(job, template) and job.metadata.uid not in skip
    )


def less_channel_only(size: GangSize, channel_only: int) -> GangSize:
    """A declared size (``spec.gang.size``, a unit's) less the pods without GPUs among it."""
    if channel_only == 0:
        return size
    return GangSize(
        pods=max(0, size.pods - channel_only),
        source=f"{size.source}, less {channel_only} without GPUs",
    )


class GpuCount(msgspec.Struct, frozen=True, kw_only=True):
    gpus: int


class GpuMismatch(msgspec.Struct, frozen=True, kw_only=True):
    message: str


def plugin_gpus(pod: Pod) -> int:
    """The pod's ``nvidia.com/gpu`` (without DRA claims)."""
    return pod.gpus(GPU_RESOURCE)


def gpus_per_pod(
    pods: Sequence[Pod], gpus_of: Callable[[Pod], int] = plugin_gpus
) -> GpuCount | GpuMismatch | None:
    """The GPUs every pod of ``pods`` (pods that take GPUs) asks for (``gpus_of`` each); None
    without pods."""
    counts = sorted({gpus_of(pod) for pod in pods})
    if not counts:
        return None
    if len(counts) > 1:
        listed = ", ".join(str(count) for count in counts)
        return GpuMismatch(
            message=f"the domain's pods ask for different GPU counts ({listed}); "
            "one gang takes one size"
        )
    return GpuCount(gpus=counts[0])
