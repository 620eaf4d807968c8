"""How big a domain's gang is, and how many GPUs each of its pods takes (pure functions).

The gang is what the allocator reserves in one go:

- ``spec.gang.size`` of the ComputeDomain when set;
- otherwise the pods the domain's workloads want: for each controlling owner of the domain's
  live pods, a ReplicaSet's or StatefulSet's ``spec.replicas`` (a Deployment's pods belong to its
  ReplicaSets, so a rolling update counts the old and the new one, surge included), a Job's
  ``spec.parallelism``, capped by the completions still missing; a pod with no such owner counts
  as one.

A workload the cache does not show yet makes the size unknown: the allocator waits rather than
reserve a wrong amount. GPUs per pod are what each pod asks for in all: its ``nvidia.com/gpu``
requests (limits win, as for every extended resource) plus the GPUs its claims ask of NVIDIA's
GPU DRA driver (``dragpus.py``); a gang may mix both ways, but its pods must agree in number.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import msgspec

from services.clique_allocator.objects import Workload, controller_of
from shared.crds.names import GPU_DEVICE_CLASS, GPU_RESOURCE
from shared.kube.models import Pod

REPLICATED_KINDS = frozenset({"ReplicaSet", "StatefulSet"})
JOB_KIND = "Job"
WORKLOAD_KINDS = REPLICATED_KINDS | {JOB_KIND}


class GangSize(msgspec.Struct, frozen=True, kw_only=True):
    """Pods in the gang, and where the number comes from (for messages)."""

    pods: int
    source: str


class UnknownSize(msgspec.Struct, frozen=True, kw_only=True):
    """The size cannot be told yet (a workload is not in the cache)."""

    message: str


WorkloadLookup = Callable[[str, str, str], Workload | None]
"""(kind, namespace, name) -> the workload from the cache, or None."""


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
    *, explicit: int | None, pods: Iterable[Pod], workload: WorkloadLookup
) -> GangSize | UnknownSize:
    """The gang's size; ``pods`` are the domain's live pods (see the module docstring)."""
    if explicit is not None:
        return GangSize(pods=explicit, source="spec.gang.size")
    total = 0
    sources: list[str] = []
    seen: set[str] = set()
    loose = 0
    for pod in pods:
        owner = controller_of(pod)
        if owner is None or owner.kind not in WORKLOAD_KINDS:
            loose += 1
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
    """The GPUs every pod of ``pods`` asks for (``gpus_of`` each); None without pods."""
    counts = sorted({gpus_of(pod) for pod in pods})
    if not counts:
        return None
    if len(counts) > 1:
        listed = ", ".join(str(count) for count in counts)
        return GpuMismatch(
            message=f"the domain's pods ask for different GPU counts ({listed}); "
            "one gang takes one size"
        )
    if counts[0] < 1:
        return GpuMismatch(
            message=f"the domain's pods ask for no GPUs ({GPU_RESOURCE}, or a claim of "
            f"DeviceClass {GPU_DEVICE_CLASS})"
        )
    return GpuCount(gpus=counts[0])
