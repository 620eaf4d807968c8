"""A recording DRA driver and helpers that play the scheduler's part for kubelet tests."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from shared.kube.client import KubeClient
from shared.kube.models import ResourceClaim
from shared.kube.resources import NODES, PODS, RESOURCE_CLAIMS
from shared.kubeletapi import (
    Claim,
    KubeletPlugin,
    PluginPaths,
    PreparedDevice,
    PrepareResult,
    UnprepareResult,
)
from sim.kubelet.models import Node, Pod

DRIVER = "channels.cdo.test"
NAMESPACE = "default"


class RecordingDriver:
    """Gives each claim one CDI device named after it; remembers what is prepared now.

    ``refused`` maps claim names to the error their prepare returns.
    """

    def __init__(self) -> None:
        self.prepared: dict[str, Claim] = {}
        self.unprepared: dict[str, Claim] = {}
        self.refused: dict[str, str] = {}

    @staticmethod
    def cdi_id(claim_name: str) -> str:
        return f"cdo.test/channel={claim_name}"

    async def prepare(self, claims: Sequence[Claim]) -> Mapping[str, PrepareResult]:
        results: dict[str, PrepareResult] = {}
        for claim in claims:
            if claim.name in self.refused:
                results[claim.uid] = PrepareResult(error=self.refused[claim.name])
                continue
            self.prepared[claim.uid] = claim
            results[claim.uid] = PrepareResult(
                devices=(
                    PreparedDevice(
                        pool_name="pool",
                        device_name="channel-0",
                        cdi_device_ids=(self.cdi_id(claim.name),),
                    ),
                )
            )
        return results

    async def unprepare(self, claims: Sequence[Claim]) -> Mapping[str, UnprepareResult]:
        for claim in claims:
            self.prepared.pop(claim.uid, None)
            self.unprepared[claim.uid] = claim
        return {claim.uid: UnprepareResult() for claim in claims}


def plugin_for(node_root: Path, driver: RecordingDriver) -> KubeletPlugin:
    return KubeletPlugin(
        driver_name=DRIVER,
        handler=driver,
        paths=PluginPaths.for_driver(DRIVER, kubelet_root=node_root),
    )


@contextlib.asynccontextmanager
async def running(coro: Coroutine[Any, Any, None], name: str) -> AsyncIterator[asyncio.Task[None]]:
    """Run ``coro`` as a task for the block; cancel it and wait for it afterwards."""
    task = asyncio.create_task(coro, name=name)
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


# -- reading ---------------------------------------------------------------------------------


async def get_pod(client: KubeClient, name: str) -> Pod | None:
    raw = await client.get_or_none(PODS, name, namespace=NAMESPACE)
    return None if raw is None else msgspec.json.decode(raw, type=Pod)


async def get_node(client: KubeClient, name: str) -> Node | None:
    raw = await client.get_or_none(NODES, name)
    return None if raw is None else msgspec.json.decode(raw, type=Node)


async def get_claim(client: KubeClient, name: str) -> ResourceClaim:
    raw = await client.get(RESOURCE_CLAIMS, name, namespace=NAMESPACE)
    return msgspec.json.decode(raw, type=ResourceClaim)


# -- playing the scheduler -------------------------------------------------------------------


async def create_allocated_claim(client: KubeClient, name: str, *, node: str) -> ResourceClaim:
    """A claim for one channel, allocated on ``node`` as the scheduler would."""
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "devices": {
                "requests": [
                    {"name": "channel", "exactly": {"deviceClassName": "channels.cdo.test"}}
                ]
            }
        },
    }
    await client.create(RESOURCE_CLAIMS, body, namespace=NAMESPACE)
    allocation = {
        "devices": {
            "results": [
                {"request": "channel", "driver": DRIVER, "pool": node, "device": "channel-0"}
            ]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        },
    }
    raw = await client.patch(
        RESOURCE_CLAIMS,
        name,
        {"status": {"allocation": allocation}},
        namespace=NAMESPACE,
        subresource="status",
    )
    return msgspec.json.decode(raw, type=ResourceClaim)


async def run_pod(
    client: KubeClient,
    name: str,
    *,
    node: str,
    claim: str | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
    annotations: Mapping[str, str] | None = None,
    restart_policy: str = "Always",
    gpus: int = 0,
) -> Pod:
    """Create a pod, reserve its claim for it and bind it to ``node``, as the scheduler does."""
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "registry.test/app:1"}],
        "restartPolicy": restart_policy,
        "tolerations": list(tolerations),
    }
    resources: dict[str, Any] = {}
    if claim is not None:
        spec["resourceClaims"] = [{"name": "channel", "resourceClaimName": claim}]
        resources["claims"] = [{"name": "channel"}]
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    if resources:
        spec["containers"][0]["resources"] = resources
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": dict(annotations or {})},
        "spec": spec,
    }
    pod = msgspec.json.decode(await client.create(PODS, body, namespace=NAMESPACE), type=Pod)
    if claim is not None:
        reserved = [{"resource": "pods", "name": name, "uid": pod.metadata.uid}]
        await client.patch(
            RESOURCE_CLAIMS,
            claim,
            {"status": {"reservedFor": reserved}},
            namespace=NAMESPACE,
            subresource="status",
        )
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    await client.request(
        "POST", PODS.path(namespace=NAMESPACE, name=name, subresource="binding"), body=binding
    )
    return pod


async def taint_node(client: KubeClient, node: str, taints: Sequence[Mapping[str, str]]) -> None:
    await client.patch(NODES, node, {"spec": {"taints": list(taints)}})
