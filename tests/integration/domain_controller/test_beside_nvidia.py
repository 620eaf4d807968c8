"""Beside NVIDIA's DRA driver for ComputeDomains the controller refuses to lead: it ends with the
reason and writes nothing, instead of fighting that driver over the same CRD's objects."""

from __future__ import annotations

import asyncio

from shared.crds.coexistence import NVIDIA_DEVICE_CLASSES
from shared.crds.names import DOMAIN_FINALIZER
from shared.kube.client import KubeClient
from shared.kube.resources import DEVICE_CLASSES
from tests.support.wait import wait_for

from .cluster import Cluster
from .conftest import ControllerFactory


def nvidia_device_class(name: str) -> dict[str, object]:
    # As NVIDIA's chart installs it: a CEL selector on its compute-domain driver's devices.
    kind = "daemon" if "daemon" in name else "channel"
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {
            "selectors": [
                {
                    "cel": {
                        "expression": "device.driver == 'compute-domain.nvidia.com' && "
                        f"device.attributes['compute-domain.nvidia.com'].type == '{kind}'"
                    }
                }
            ]
        },
    }


async def test_the_controller_ends_with_the_reason_and_leaves_domains_alone(
    kube_client: KubeClient, cluster: Cluster, start_controller: ControllerFactory, crds: None
) -> None:
    for name in NVIDIA_DEVICE_CLASSES:
        await kube_client.create(DEVICE_CLASSES, nvidia_device_class(name))
    domain = await cluster.create_domain("train", "train-channel")

    controller = start_controller()
    code = await asyncio.to_thread(controller.process.wait, 60)

    assert code == 1
    reasons = [
        record.get("reason", "")
        for record in controller.process.log_records()
        if record["message"] == "stopping after a fatal error"
    ]
    assert len(reasons) == 1, controller.process.stderr_text()[-2000:]
    assert "NVIDIA's DRA driver for ComputeDomains is installed (DeviceClass " in reasons[0]
    assert "docs/migrating.md" in reasons[0]
    after = await cluster.domain("train")
    assert after is not None
    assert after.metadata.resource_version == domain.metadata.resource_version
    assert DOMAIN_FINALIZER not in after.metadata.finalizers
    assert await cluster.template("train-channel") is None


async def test_without_nvidia_device_classes_the_same_start_takes_the_domain(
    cluster: Cluster, start_controller: ControllerFactory, crds: None
) -> None:
    await cluster.create_domain("train", "train-channel")
    controller = start_controller()
    await controller.wait_ready()

    async def finalized() -> bool:
        after = await cluster.domain("train")
        return after is not None and DOMAIN_FINALIZER in after.metadata.finalizers

    await wait_for(finalized, what="the domain's finalizer")
    await wait_for(lambda: cluster.template("train-channel"), what="the domain's template")
