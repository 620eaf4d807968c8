"""The manifest users already have, applied and awaited with the real kubectl."""

from __future__ import annotations

import asyncio
from pathlib import Path

from shared.crds.names import CHANNEL_DEVICE_CLASS, DOMAIN_FINALIZER, DOMAIN_LABEL, DOMAIN_UID_LABEL
from sim.kubeapi import KubeServer
from tests.support.kubectl import kubectl as run_kubectl
from tests.support.wait import wait_for

from .cluster import CLIQUE, Cluster
from .conftest import Controller

SEED = """\
apiVersion: resource.nvidia.com/v1beta1
kind: ComputeDomain
metadata: {name: training-domain-1}
spec:
  channel:
    resourceClaimTemplate: {name: training-domain-1-rct}
"""


async def kubectl(emulator: KubeServer, *args: str, limit_s: float = 60) -> tuple[int, str, str]:
    return await run_kubectl(emulator.kubeconfig, *args, limit_s=limit_s)


async def test_seed_manifest_applies_and_kubectl_wait_sees_it_ready(
    emulator: KubeServer, cluster: Cluster, controller: Controller, tmp_path: Path
) -> None:
    manifest = tmp_path / "domain.yaml"
    manifest.write_text(SEED)
    rc, out, err = await kubectl(emulator, "apply", "-f", str(manifest))
    assert rc == 0, err
    assert "computedomain.resource.nvidia.com/training-domain-1 created" in out

    template = await wait_for(
        lambda: cluster.template("training-domain-1-rct"), what="the claim template"
    )
    domain = await cluster.domain("training-domain-1")
    assert domain is not None and DOMAIN_FINALIZER in domain.metadata.finalizers
    labels = {DOMAIN_LABEL: "training-domain-1", DOMAIN_UID_LABEL: domain.metadata.uid}
    assert labels.items() <= template.metadata.labels.items()
    assert template.spec["metadata"]["labels"] == labels  # claims made from it inherit them
    (request,) = template.spec["spec"]["devices"]["requests"]
    assert request["exactly"]["deviceClassName"] == CHANNEL_DEVICE_CLASS
    assert request["exactly"]["count"] == 1
    (owner,) = template.metadata.owner_references
    assert (owner.kind, owner.uid, owner.controller) == ("ComputeDomain", domain.metadata.uid, True)
    device_class = await wait_for(lambda: cluster.device_class(CHANNEL_DEVICE_CLASS))
    assert "compute-domain.cdo.dev" in device_class.spec["selectors"][0]["cel"]["expression"]

    placed = await wait_for(
        lambda: cluster.condition("training-domain-1", "Placed"), what="status written"
    )
    assert (placed.status, placed.reason) == ("False", "WaitingForPlacement")

    waiting = asyncio.create_task(
        kubectl(
            emulator,
            "wait",
            "--for=condition=Ready",
            "computedomain/training-domain-1",
            "--timeout=60s",
        )
    )
    for index, node in enumerate(("gb200-r1-n01", "gb200-r1-n02")):
        await cluster.create_node(node, address=f"10.0.1.{index + 1}")
    await cluster.run_gang(domain, ["gb200-r1-n01", "gb200-r1-n02"], per_node=2)
    rc, out, err = await waiting
    assert rc == 0, err
    assert "condition met" in out

    rc, out, err = await kubectl(emulator, "get", "computedomains")
    assert rc == 0, err
    header, row = out.splitlines()
    assert header.split() == ["NAME", "STATUS", "CLIQUE", "CHANNEL", "AGE"]
    assert row.split()[:4] == ["training-domain-1", "Ready", CLIQUE, "3"]

    ready = await cluster.domain("training-domain-1")
    assert ready is not None
    assert [(n.name, n.ip_address, n.index, n.status) for n in ready.status.nodes] == [
        ("gb200-r1-n01", "10.0.1.1", 0, "Ready"),
        ("gb200-r1-n02", "10.0.1.2", 1, "Ready"),
    ]
    assert ready.status.observed_generation == ready.metadata.generation
