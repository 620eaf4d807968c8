"""ComputeDomains stored by NVIDIA's current driver (v1beta2) keep working when cdo takes over.

NVIDIA's CRD is rebuilt here from the facts of its chart (versions, storage, conversion webhook;
docs/migrating.md cites them): v1beta1 and v1beta2 served, v1beta2 stored, converted by its
webhook service. Domains are stored as NVIDIA's stack leaves them; then its webhook is gone
(the driver uninstalled), cdo's CRD is applied over NVIDIA's, and cdo's domain controller
reconciles the stored objects, read as v1beta2, without rewriting them first.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import msgspec
import pytest

from shared.crds import COMPUTE_DOMAINS, COMPUTE_DOMAINS_V1BETA1, ComputeDomain, install_crds
from shared.crds.install import CRDS
from shared.crds.names import DOMAIN_FINALIZER, NUM_NODES_ANNOTATION
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from tests.support.conversion import conversion_webhook
from tests.support.wait import wait_for

from .cluster import NAMESPACE, Cluster
from .conftest import ControllerFactory

NVIDIA_FINALIZER = "resource.nvidia.com/computeDomain"
ONLY_NVIDIA: list[dict[str, Any]] = [
    {"op": "test", "path": "/metadata/finalizers", "value": [NVIDIA_FINALIZER]},
    {"op": "remove", "path": "/metadata/finalizers"},
]
"""docs/migrating.md's patch: NVIDIA's finalizer removed when it is the only one."""
NVIDIA_WEBHOOK = {
    "namespace": "nvidia-dra-driver-gpu",
    "name": "nvidia-dra-driver-gpu-webhook",
    "path": "/convert-computedomain",
    "port": 443,
}


def _nvidia_schema(*, num_nodes: bool) -> dict[str, Any]:
    channel = {
        "type": "object",
        "required": ["resourceClaimTemplate"],
        "properties": {
            "resourceClaimTemplate": {
                "type": "object",
                "required": ["name"],
                "properties": {"name": {"type": "string"}},
            },
            "allocationMode": {"type": "string", "enum": ["All", "Single"], "default": "Single"},
        },
    }
    spec: dict[str, Any] = {
        "type": "object",
        "required": ["channel"],
        "properties": {"channel": channel},
        "x-kubernetes-validations": [
            {"rule": "self == oldSelf", "message": "A computeDomain.spec is immutable"}
        ],
    }
    if num_nodes:
        spec["properties"]["numNodes"] = {"type": "integer", "minimum": 0, "default": 0}
    node = {
        "type": "object",
        "required": ["cliqueID", "ipAddress", "name"],
        "properties": {
            "name": {"type": "string"},
            "ipAddress": {"type": "string"},
            "cliqueID": {"type": "string"},
            "index": {"type": "integer"},
            "status": {"type": "string", "enum": ["Ready", "NotReady"], "default": "NotReady"},
        },
    }
    status = {
        "type": "object",
        "required": ["status"],
        "properties": {
            "status": {"type": "string", "enum": ["Ready", "NotReady"], "default": "NotReady"},
            "nodes": {
                "type": "array",
                "items": node,
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
            },
        },
    }
    return {
        "openAPIV3Schema": {
            "type": "object",
            "properties": {"spec": spec, "status": status},
        }
    }


def nvidia_crd() -> dict[str, Any]:
    """The ComputeDomain CRD as NVIDIA's chart (v0.5.0) serves it: v1beta2 stored."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": "computedomains.resource.nvidia.com",
            "labels": {"app.kubernetes.io/managed-by": "Helm"},
        },
        "spec": {
            "group": "resource.nvidia.com",
            "names": {
                "kind": "ComputeDomain",
                "listKind": "ComputeDomainList",
                "plural": "computedomains",
                "singular": "computedomain",
            },
            "scope": "Namespaced",
            "conversion": {
                "strategy": "Webhook",
                "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": {"service": NVIDIA_WEBHOOK},
                },
            },
            "versions": [
                {
                    "name": "v1beta1",
                    "deprecated": True,
                    "served": True,
                    "storage": False,
                    "schema": _nvidia_schema(num_nodes=True),
                    "subresources": {"status": {}},
                },
                {
                    "name": "v1beta2",
                    "served": True,
                    "storage": True,
                    "schema": _nvidia_schema(num_nodes=False),
                    "subresources": {"status": {}},
                },
            ],
        },
    }


async def store_as_nvidia(
    client: KubeClient, name: str, *, num_nodes: str | None, mode: str = "Single"
) -> dict[str, Any]:
    """A domain as NVIDIA's controller leaves it: its finalizer, its status, numNodes kept in
    the annotation (NVIDIA's converter writes one only for a value above 0)."""
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": NAMESPACE,
        "finalizers": [NVIDIA_FINALIZER],
    }
    if num_nodes is not None:
        metadata["annotations"] = {NUM_NODES_ANNOTATION: num_nodes}
    body = {
        "apiVersion": COMPUTE_DOMAINS.api_version,
        "kind": "ComputeDomain",
        "metadata": metadata,
        "spec": {
            "channel": {"resourceClaimTemplate": {"name": f"{name}-rct"}, "allocationMode": mode}
        },
    }
    await client.create(COMPUTE_DOMAINS, body, namespace=NAMESPACE)
    status = {"status": {"status": "Ready", "nodes": []}}
    raw = await client.patch(
        COMPUTE_DOMAINS, name, status, namespace=NAMESPACE, subresource="status"
    )
    stored: dict[str, Any] = msgspec.json.decode(raw)
    return stored


async def test_domains_nvidia_stored_are_read_and_reconciled_by_cdo(
    kube_client: KubeClient, start_controller: ControllerFactory
) -> None:
    await install_crds(kube_client, [nvidia_crd()])
    train = await store_as_nvidia(kube_client, "train", num_nodes="4")
    infer = await store_as_nvidia(kube_client, "infer", num_nodes=None, mode="All")

    # NVIDIA's driver is uninstalled: its webhook is gone, v1beta2 reads need none.
    with pytest.raises(KubeApiError) as caught:
        await kube_client.get(COMPUTE_DOMAINS_V1BETA1, "train", namespace=NAMESPACE)
    assert caught.value.code == 500
    assert 'service "nvidia-dra-driver-gpu-webhook" not found' in caught.value.message
    await kube_client.get(COMPUTE_DOMAINS, "train", namespace=NAMESPACE)
    # docs/migrating.md, step 3: NVIDIA's finalizer removed, and only when it is the only one.
    for name in ("train", "infer"):
        raw = await kube_client.patch(
            COMPUTE_DOMAINS, name, ONLY_NVIDIA, namespace=NAMESPACE, patch_type="json"
        )
        assert "finalizers" not in msgspec.json.decode(raw)["metadata"]
    train = msgspec.json.decode(
        await kube_client.get(COMPUTE_DOMAINS, "train", namespace=NAMESPACE)
    )
    infer = msgspec.json.decode(
        await kube_client.get(COMPUTE_DOMAINS, "infer", namespace=NAMESPACE)
    )

    async with conversion_webhook() as webhook:
        await install_crds(kube_client, webhook.crds())
        crd = msgspec.json.decode(await kube_client.get(CRDS, "computedomains.resource.nvidia.com"))
        assert crd["status"]["storedVersions"] == ["v1beta2"]  # nothing to migrate
        for before in (train, infer):
            name = before["metadata"]["name"]
            now = msgspec.json.decode(
                await kube_client.get(COMPUTE_DOMAINS, name, namespace=NAMESPACE)
            )
            assert now["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]

        old = msgspec.json.decode(
            await kube_client.get(COMPUTE_DOMAINS_V1BETA1, "train", namespace=NAMESPACE)
        )
        assert old["spec"]["numNodes"] == 4

        controller = start_controller()
        await controller.wait_ready()
        cluster = Cluster(kube_client)

        async def reconciled(name: str) -> ComputeDomain | None:
            domain = await cluster.domain(name)
            if domain is None or DOMAIN_FINALIZER not in domain.metadata.finalizers:
                return None
            placed = domain.status.condition("Placed")
            return domain if placed is not None else None

        for name in ("train", "infer"):
            taken = await wait_for(partial(reconciled, name), what=f"{name} reconciled")
            assert taken.metadata.finalizers == (DOMAIN_FINALIZER,)
            placed = taken.status.condition("Placed")
            assert placed is not None and placed.reason == "WaitingForPlacement"
            await wait_for(partial(cluster.template, f"{name}-rct"), what=f"{name}'s template")

        train_now = await cluster.domain("train")
        assert train_now is not None
        assert train_now.metadata.annotations[NUM_NODES_ANNOTATION] == "4"
        old = msgspec.json.decode(
            await kube_client.get(COMPUTE_DOMAINS_V1BETA1, "train", namespace=NAMESPACE)
        )
        assert old["spec"]["numNodes"] == 4
        assert old["spec"]["channel"]["allocationMode"] == "Single"

        # A taken domain is deleted through cdo's finalizer alone.
        await cluster.delete_domain("infer")

        async def gone() -> bool:
            return await cluster.domain("infer") is None

        await wait_for(gone, what="infer deleted")
        assert await cluster.template("infer-rct") is None
