"""The end-to-end benchmark's scenarios as plain manifests: pure functions, no I/O.

Each scenario is the objects one ``kubectl apply`` sends (a ComputeDomain and its workload, in a
namespace of the scenario's own) and what "done" means for it: which domains must report Ready,
how many pods must run, and, for a domain larger than a clique, the slices its Placement must
have.

(c) and (d) are each one ComputeDomain larger than any clique, which the allocator cuts into
slices, each inside one clique with its own channel there: (c) with ``spec.gang.sliceSize: 64``
(256 one-GPU pods: 4 slices of 64, and since two slices of 64 GPUs never fit one 72-GPU clique,
each in a clique of its own), (d) without it (every GPU of the cluster: the fewest slices that
fit, one per clique). Neither sets ``spec.gang.size``: the gang is the Job's parallelism.

Their workload is an Indexed Job, the way a multi-node training job runs: each pod carries its
completion index, the allocator seats consecutive ranks in one slice, and the benchmark checks
that every pod's seat has its index as its rank. (a), (b) and the fault scenario keep the seed
example's Deployment. The failover scenario is an Indexed Job too, in one clique, with a short
``spec.failover.graceSeconds``: its pods are evicted when its slice moves, and the Job recreates
them by index.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

Manifest = dict[str, Any]

SEED_DOMAIN = "training-domain-1"
SEED_DEPLOYMENT = "llm-training"
CLIQUE_LABEL = "nvidia.com/gpu.clique"
JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
"""The label (and annotation) an Indexed Job's controller puts on each pod: its index."""
CLIQUE_NODES = 18
"""Trays, and so nodes of 4 GPUs, in one NVL72 clique of the benchmark's topologies."""


@dataclass(frozen=True)
class Scenario:
    key: str
    """Short name, used in the RESULT line (``<key>_p50_s``)."""
    title: str
    namespace: str
    domains: tuple[str, ...]
    """Domains that must all report ``status.status: Ready``."""
    pods: int
    """Pods that must all be Running."""
    gpus_per_pod: int
    manifests: tuple[Manifest, ...]
    slice_sizes: tuple[int, ...] = ()
    """The sizes of the slices the domain's Placement must have, by index, each slice in a
    clique of its own; empty: not checked (a domain that fits one clique)."""

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod


def compute_domain(
    name: str,
    namespace: str,
    *,
    gang_size: int | None = None,
    slice_size: int | None = None,
    failover_grace_s: int | None = None,
) -> Manifest:
    """A ComputeDomain in the shape NVIDIA's driver accepts; ``spec.gang`` (``gang_size``,
    ``slice_size``) and ``spec.failover.graceSeconds`` (``failover_grace_s``) are cdo's
    additions."""
    spec: Manifest = {"channel": {"resourceClaimTemplate": {"name": claim_template(name)}}}
    gang = {
        key: value
        for key, value in (("size", gang_size), ("sliceSize", slice_size))
        if value is not None
    }
    if gang:
        spec["gang"] = gang
    if failover_grace_s is not None:
        spec["failover"] = {"graceSeconds": failover_grace_s}
    return {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def claim_template(domain: str) -> str:
    return f"{domain}-rct"


DEFAULT_IMAGE = "registry.example.com/bench:1.0"
DEFAULT_COMMAND = ("sleep", "infinity")


def gpu_pod_spec(
    *, domain: str, gpus_per_pod: int, command: tuple[str, ...], image: str
) -> Manifest:
    """A pod of ``gpus_per_pod`` GPUs holding the domain's IMEX channel claim."""
    return {
        "containers": [
            {
                "name": "trainer",
                "image": image,
                "command": list(command),
                "resources": {
                    "limits": {"nvidia.com/gpu": gpus_per_pod},
                    "claims": [{"name": "imex-channel"}],
                },
            }
        ],
        "resourceClaims": [
            {"name": "imex-channel", "resourceClaimTemplateName": claim_template(domain)}
        ],
    }


def gpu_deployment(
    name: str,
    namespace: str,
    *,
    domain: str,
    replicas: int,
    gpus_per_pod: int,
    clique_affinity: bool = False,
    command: tuple[str, ...] = DEFAULT_COMMAND,
    image: str = DEFAULT_IMAGE,
) -> Manifest:
    """``replicas`` pods of ``gpus_per_pod`` GPUs each, all holding the domain's channel claim.

    ``clique_affinity`` adds the required pod affinity on the clique label that users of NVIDIA's
    driver write by hand to keep a workload in one clique.
    """
    pod_spec = gpu_pod_spec(domain=domain, gpus_per_pod=gpus_per_pod, command=command, image=image)
    if clique_affinity:
        pod_spec = {
            "affinity": {
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "labelSelector": {
                                "matchExpressions": [
                                    {"key": "app", "operator": "In", "values": [name]}
                                ]
                            },
                            "topologyKey": CLIQUE_LABEL,
                        }
                    ]
                }
            },
            **pod_spec,
        }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec},
        },
    }


def gpu_job(
    name: str,
    namespace: str,
    *,
    domain: str,
    pods: int,
    gpus_per_pod: int,
    command: tuple[str, ...] = DEFAULT_COMMAND,
    image: str = DEFAULT_IMAGE,
) -> Manifest:
    """An Indexed Job of ``pods`` pods (ranks 0 .. pods - 1) that all run at once, each of
    ``gpus_per_pod`` GPUs holding the domain's channel claim."""
    pod_spec = gpu_pod_spec(domain=domain, gpus_per_pod=gpus_per_pod, command=command, image=image)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "completionMode": "Indexed",
            "completions": pods,
            "parallelism": pods,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"restartPolicy": "Never", **pod_spec},
            },
        },
    }


def cut(pods: int, slice_pods: int) -> tuple[int, ...]:
    """Slice sizes of a gang of ``pods`` cut into slices of ``slice_pods`` (the last smaller)."""
    full, rest = divmod(pods, slice_pods)
    return (slice_pods,) * full + ((rest,) if rest else ())


def seed(namespace: str = "e2e-seed") -> Scenario:
    """(a) deploy/examples: training-domain-1 and llm-training, 18 pods x 4 GPUs (a whole rack)."""
    return Scenario(
        key="seed",
        title="(a) seed workload, 18 pods x 4 GPUs",
        namespace=namespace,
        domains=(SEED_DOMAIN,),
        pods=18,
        gpus_per_pod=4,
        manifests=(
            compute_domain(SEED_DOMAIN, namespace),
            gpu_deployment(
                SEED_DEPLOYMENT,
                namespace,
                domain=SEED_DOMAIN,
                replicas=18,
                gpus_per_pod=4,
                clique_affinity=True,
                command=("torchrun", "--nnodes=18", "--nproc-per-node=4", "train.py"),
                image="registry.example.com/llm-trainer:1.0",
            ),
        ),
    )


def gpu72(namespace: str = "e2e-gpu72") -> Scenario:
    """(b) 72 one-GPU pods in one domain: a whole clique, four pods per node."""
    return Scenario(
        key="gpu72",
        title="(b) 72 pods x 1 GPU, one domain",
        namespace=namespace,
        domains=("gpu72",),
        pods=72,
        gpus_per_pod=1,
        manifests=(
            compute_domain("gpu72", namespace),
            gpu_deployment("gpu72", namespace, domain="gpu72", replicas=72, gpus_per_pod=1),
        ),
    )


def slices(namespace: str = "", *, pods: int = 256, slice_pods: int = 64) -> Scenario:
    """(c) One domain of ``pods`` one-GPU pods (an Indexed Job), cut into slices of
    ``slice_pods`` with ``spec.gang.sliceSize``; in namespace ``e2e-slices<pods>`` unless
    ``namespace`` names another."""
    sizes = cut(pods, slice_pods)
    namespace = namespace or f"e2e-slices{pods}"
    return Scenario(
        key=f"slices{pods}",
        title=f"(c) {pods} pods x 1 GPU, {len(sizes)} slices of {slice_pods}",
        namespace=namespace,
        domains=("slices",),
        pods=pods,
        gpus_per_pod=1,
        manifests=(
            compute_domain("slices", namespace, slice_size=slice_pods),
            gpu_job("slices", namespace, domain="slices", pods=pods, gpus_per_pod=1),
        ),
        slice_sizes=sizes,
    )


def whole_cluster(namespace: str = "e2e-whole-cluster", *, cliques: int = 4) -> Scenario:
    """(d) One domain of every GPU of ``cliques`` full cliques: a pod of 4 GPUs per node (an
    Indexed Job), which the allocator cuts without ``sliceSize`` into one slice per clique."""
    pods = cliques * CLIQUE_NODES
    return Scenario(
        key="whole_cluster",
        title=f"(d) {pods} pods x 4 GPUs, whole cluster, {cliques} slices",
        namespace=namespace,
        domains=("whole-cluster",),
        pods=pods,
        gpus_per_pod=4,
        manifests=(
            compute_domain("whole-cluster", namespace),
            gpu_job("whole-cluster", namespace, domain="whole-cluster", pods=pods, gpus_per_pod=4),
        ),
        slice_sizes=(CLIQUE_NODES,) * cliques,
    )


def fault_target(namespace: str = "e2e-fault", *, pods: int = 9) -> Scenario:
    """A seed-like domain that leaves its clique room for a replacement: ``pods`` x 4 GPUs."""
    return Scenario(
        key="fault",
        title=f"fault domain, {pods} pods x 4 GPUs",
        namespace=namespace,
        domains=("fault-domain",),
        pods=pods,
        gpus_per_pod=4,
        manifests=(
            compute_domain("fault-domain", namespace),
            gpu_deployment(
                "fault-training",
                namespace,
                domain="fault-domain",
                replicas=pods,
                gpus_per_pod=4,
                clique_affinity=True,
            ),
        ),
    )


FAILOVER_GRACE_S = 5
"""The failover scenario's ``spec.failover.graceSeconds`` (the default is 300 s)."""


def failover_target(
    namespace: str = "e2e-failover", *, pods: int = 9, grace_s: int = FAILOVER_GRACE_S
) -> Scenario:
    """A domain of ``pods`` x 4 GPUs (an Indexed Job) in one clique, half of it, that moves to
    another clique ``grace_s`` after its clique lost its fabric (policy ``Move``, the default)."""
    return Scenario(
        key="failover",
        title=f"failover domain, {pods} pods x 4 GPUs",
        namespace=namespace,
        domains=("failover-domain",),
        pods=pods,
        gpus_per_pod=4,
        manifests=(
            compute_domain("failover-domain", namespace, failover_grace_s=grace_s),
            gpu_job(
                "failover-training", namespace, domain="failover-domain", pods=pods, gpus_per_pod=4
            ),
        ),
    )


LWS_GROUPS = 16
LWS_SIZE = 4


def lws_groups(namespace: str = "e2e-lws", *, groups: int = LWS_GROUPS) -> Scenario:
    """(e) A LeaderWorkerSet of ``groups`` groups of 4 one-GPU pods in one domain: each group a
    gang unit of its own, placed apart from the others with its own channel."""
    pod_template = {
        "spec": gpu_pod_spec(
            domain="lws", gpus_per_pod=1, command=DEFAULT_COMMAND, image=DEFAULT_IMAGE
        )
    }
    return Scenario(
        key="lws_groups_ready",
        title=f"(e) LWS {groups} groups x {LWS_SIZE} pods x 1 GPU",
        namespace=namespace,
        domains=("lws",),
        pods=groups * LWS_SIZE,
        gpus_per_pod=1,
        manifests=(
            compute_domain("lws", namespace),
            {
                "apiVersion": "leaderworkerset.x-k8s.io/v1",
                "kind": "LeaderWorkerSet",
                "metadata": {"name": "lws", "namespace": namespace},
                "spec": {
                    "replicas": groups,
                    "leaderWorkerTemplate": {"size": LWS_SIZE, "workerTemplate": pod_template},
                },
            },
        ),
    )


def namespace_manifest(name: str) -> Manifest:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def render(manifests: tuple[Manifest, ...]) -> str:
    """The manifests as one multi-document YAML file, the way they would sit in a repository."""
    return yaml.safe_dump_all(manifests, sort_keys=False, explicit_start=True)
