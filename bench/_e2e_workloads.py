"""The end-to-end benchmark's scenarios as plain manifests: pure functions, no I/O.

Each scenario is the objects one ``kubectl apply`` sends (ComputeDomains and their workloads, in
a namespace of the scenario's own) and what "done" means for it: which domains must report
Ready and how many pods must run.

(c), 256 one-GPU pods as 4 slices of 64, is four ComputeDomains of 64 pods applied together,
one per slice. A Placement records one clique and one channel, so the allocator places a single
domain larger than a clique nowhere, ``spec.gang.sliceSize`` or not
(docs/clique-allocator.md, Limits); a domain per slice is how such a job runs today, and each
slice still gets a clique of its own because two slices of 64 GPUs never fit one 72-GPU clique.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

Manifest = dict[str, Any]

SEED_DOMAIN = "training-domain-1"
SEED_DEPLOYMENT = "llm-training"
CLIQUE_LABEL = "nvidia.com/gpu.clique"


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

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod


def compute_domain(name: str, namespace: str, *, gang_size: int | None = None) -> Manifest:
    """A ComputeDomain in the shape NVIDIA's driver accepts; ``gang_size`` is cdo's addition."""
    spec: Manifest = {"channel": {"resourceClaimTemplate": {"name": claim_template(name)}}}
    if gang_size is not None:
        spec["gang"] = {"size": gang_size}
    return {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def claim_template(domain: str) -> str:
    return f"{domain}-rct"


def gpu_deployment(
    name: str,
    namespace: str,
    *,
    domain: str,
    replicas: int,
    gpus_per_pod: int,
    clique_affinity: bool = False,
    command: tuple[str, ...] = ("sleep", "infinity"),
    image: str = "registry.example.com/bench:1.0",
) -> Manifest:
    """Pods of ``gpus_per_pod`` GPUs each, all holding the domain's IMEX channel claim.

    ``clique_affinity`` adds the required pod affinity on the clique label that users of NVIDIA's
    driver write by hand to keep a workload in one clique.
    """
    pod_spec: Manifest = {
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


def slices(namespace: str = "e2e-slices256", *, count: int = 4, slice_pods: int = 64) -> Scenario:
    """(c) ``count`` slices of ``slice_pods`` one-GPU pods, a domain per slice, in one apply."""
    names = tuple(f"slice-{index}" for index in range(count))
    manifests: list[Manifest] = []
    for name in names:
        manifests.append(compute_domain(name, namespace, gang_size=slice_pods))
        manifests.append(
            gpu_deployment(name, namespace, domain=name, replicas=slice_pods, gpus_per_pod=1)
        )
    return Scenario(
        key=f"slices{count * slice_pods}",
        title=f"(c) {count * slice_pods} pods x 1 GPU, {count} slices of {slice_pods}",
        namespace=namespace,
        domains=names,
        pods=count * slice_pods,
        gpus_per_pod=1,
        manifests=tuple(manifests),
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


def namespace_manifest(name: str) -> Manifest:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def render(manifests: tuple[Manifest, ...]) -> str:
    """The manifests as one multi-document YAML file, the way they would sit in a repository."""
    return yaml.safe_dump_all(manifests, sort_keys=False, explicit_start=True)
