"""Objects for the controllers' pure functions, decoded from JSON as the informers decode them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from shared.kube.models import Pod, ResourceClaim, ResourceClaimTemplate
from sim.controllers.objects import Deployment, Job, ReplicaSet

NOW = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)


def stamp(seconds_ago: float) -> str:
    return (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def template(**labels: str) -> dict[str, Any]:
    return {
        "metadata": {"labels": labels or {"app": "a"}},
        "spec": {"containers": [{"name": "c", "image": "img:1"}]},
    }


def owner_ref(kind: str, name: str, uid: str, api_version: str) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def pod(
    name: str,
    *,
    phase: str = "Pending",
    node: str = "",
    ready_for: float | None = None,
    age: float = 100.0,
    deleting: bool = False,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    owner: dict[str, Any] | None = None,
    claims: list[dict[str, Any]] | None = None,
    claim_statuses: list[dict[str, Any]] | None = None,
    uid: str = "",
) -> Pod:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": uid or f"uid-{name}",
        "creationTimestamp": stamp(age),
        "labels": labels if labels is not None else {"app": "a"},
        "annotations": annotations or {},
    }
    if deleting:
        metadata["deletionTimestamp"] = stamp(0)
    if owner is not None:
        metadata["ownerReferences"] = [owner]
    status: dict[str, Any] = {"phase": phase}
    if ready_for is not None:
        status["conditions"] = [
            {"type": "Ready", "status": "True", "lastTransitionTime": stamp(ready_for)}
        ]
    if claim_statuses:
        status["resourceClaimStatuses"] = claim_statuses
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if node:
        spec["nodeName"] = node
    if claims:
        spec["resourceClaims"] = claims
    return msgspec.convert({"metadata": metadata, "spec": spec, "status": status}, Pod)


def replica_set(
    name: str,
    *,
    replicas: int,
    available: int = 0,
    status_replicas: int | None = None,
    ready: int | None = None,
    age: float = 100.0,
    revision: int = 1,
    tmpl: dict[str, Any] | None = None,
    generation: int = 1,
    observed: int = 1,
    min_ready: int = 0,
    conditions: list[dict[str, Any]] | None = None,
) -> ReplicaSet:
    return msgspec.convert(
        {
            "metadata": {
                "name": name,
                "namespace": "ns",
                "uid": f"uid-{name}",
                "creationTimestamp": stamp(age),
                "generation": generation,
                "annotations": {"deployment.kubernetes.io/revision": str(revision)},
            },
            "spec": {
                "replicas": replicas,
                "minReadySeconds": min_ready,
                "template": tmpl or template(),
            },
            "status": {
                "replicas": replicas if status_replicas is None else status_replicas,
                "readyReplicas": available if ready is None else ready,
                "availableReplicas": available,
                "observedGeneration": observed,
                "conditions": conditions or [],
            },
        },
        ReplicaSet,
    )


def deployment(
    *,
    replicas: int,
    strategy: str = "RollingUpdate",
    surge: int | str = "25%",
    unavailable: int | str = "25%",
    tmpl: dict[str, Any] | None = None,
    history: int | None = 10,
    paused: bool = False,
    status: dict[str, Any] | None = None,
) -> Deployment:
    spec: dict[str, Any] = {
        "replicas": replicas,
        "selector": {"matchLabels": {"app": "a"}},
        "template": tmpl or template(),
        "strategy": {"type": strategy},
        "revisionHistoryLimit": history,
        "paused": paused,
    }
    if strategy == "RollingUpdate":
        spec["strategy"]["rollingUpdate"] = {"maxSurge": surge, "maxUnavailable": unavailable}
    return msgspec.convert(
        {
            "metadata": {"name": "web", "namespace": "ns", "uid": "uid-web", "generation": 3},
            "spec": spec,
            "status": status or {},
        },
        Deployment,
    )


def job(
    *,
    parallelism: int = 1,
    completions: int | None = 1,
    backoff_limit: int = 6,
    indexed: bool = False,
    suspend: bool = False,
    status: dict[str, Any] | None = None,
) -> Job:
    return msgspec.convert(
        {
            "metadata": {"name": "work", "namespace": "ns", "uid": "uid-work", "generation": 1},
            "spec": {
                "parallelism": parallelism,
                "completions": completions,
                "backoffLimit": backoff_limit,
                "completionMode": "Indexed" if indexed else "NonIndexed",
                "suspend": suspend,
                "template": template(),
            },
            "status": status or {},
        },
        Job,
    )


def claim_template(name: str = "channel") -> ResourceClaimTemplate:
    return msgspec.convert(
        {
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
            "spec": {
                "metadata": {
                    "labels": {"cdo.dev/compute-domain": "dom"},
                    "annotations": {"note": "x"},
                },
                "spec": {"devices": {"requests": [{"name": "ch", "exactly": {"count": 1}}]}},
            },
        },
        ResourceClaimTemplate,
    )


def claim(
    name: str,
    *,
    owner: dict[str, Any] | None = None,
    entry: str | None = None,
    reserved_for: list[str] | None = None,
    allocated: bool = False,
    finalizers: list[str] | None = None,
    deleting: bool = False,
) -> ResourceClaim:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": f"uid-{name}",
        "resourceVersion": "42",
        "annotations": {"resource.kubernetes.io/pod-claim-name": entry} if entry else {},
        "finalizers": finalizers or [],
    }
    if owner is not None:
        metadata["ownerReferences"] = [owner]
    if deleting:
        metadata["deletionTimestamp"] = stamp(0)
    status: dict[str, Any] = {
        "reservedFor": [
            {"resource": "pods", "name": pod_name, "uid": f"uid-{pod_name}"}
            for pod_name in reserved_for or []
        ]
    }
    if allocated:
        status["allocation"] = {"devices": {"results": []}}
    return msgspec.convert({"metadata": metadata, "status": status}, ResourceClaim)
