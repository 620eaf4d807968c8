"""A pod's rank in its gang, read from the index labels its workload controller sets (pure).

Rank-aware slices keep consecutive ranks in one slice, so that NCCL's NVLink groups line up with
the job's ranks. The index a pod carries, first match wins:

- JobSet: label ``jobset.sigs.k8s.io/job-global-index`` on a pod of an Indexed Job: the global
  index times the Job's parallelism, plus the completion index;
- LeaderWorkerSet: labels ``leaderworkerset.sigs.k8s.io/group-index`` and ``.../worker-index``
  and annotation ``.../size``: the group index times the size, plus the worker index (the
  leader is worker 0);
- Indexed Job: label (or annotation) ``batch.kubernetes.io/job-completion-index``;
- StatefulSet: label ``apps.kubernetes.io/pod-index``, the ordinal.

A LeaderWorkerSet whose group index is a hash (``groupIdentity: Hash``) gives no numeric group
index, and its pods count as unindexed. Label names are from the JobSet, LeaderWorkerSet and
Kubernetes documentation (docs/clique-allocator.md cites them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from services.clique_allocator.objects import controller_of
from shared.kube.models import Pod

JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
STATEFULSET_POD_INDEX = "apps.kubernetes.io/pod-index"
JOBSET_GLOBAL_INDEX = "jobset.sigs.k8s.io/job-global-index"
LWS_GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
LWS_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_SIZE = "leaderworkerset.sigs.k8s.io/size"

ParallelismLookup = Callable[[str, str], int | None]
"""(namespace, Job name) -> the Job's ``spec.parallelism`` (1 when unset), or None if unknown."""


def _number(values: Mapping[str, str], key: str) -> int | None:
    text = values.get(key)
    if text is None or not text.isdigit():
        return None
    return int(text)


def _label_or_annotation(pod: Pod, key: str) -> int | None:
    found = _number(pod.metadata.labels, key)
    return found if found is not None else _number(pod.metadata.annotations, key)


def pod_rank(pod: Pod, *, parallelism: ParallelismLookup) -> int | None:
    """The pod's rank from its workload's index labels, or None for a pod without one."""
    completion = _label_or_annotation(pod, JOB_COMPLETION_INDEX)
    global_index = _number(pod.metadata.labels, JOBSET_GLOBAL_INDEX)
    if global_index is not None and completion is not None:
        owner = controller_of(pod)
        width = parallelism(pod.metadata.namespace, owner.name) if owner is not None else None
        return None if width is None else global_index * width + completion
    worker = _number(pod.metadata.labels, LWS_WORKER_INDEX)
    if worker is not None:
        group = _number(pod.metadata.labels, LWS_GROUP_INDEX)
        size = _label_or_annotation(pod, LWS_SIZE)
        return None if group is None or size is None else group * size + worker
    if completion is not None:
        return completion
    return _number(pod.metadata.labels, STATEFULSET_POD_INDEX)
