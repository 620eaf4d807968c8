"""cdo beside NVIDIA's DRA driver for ComputeDomains: found, and refused.

Both serve the CRD ``computedomains.resource.nvidia.com`` (cdo takes NVIDIA's manifests as they
are), so both would act on every ComputeDomain: two controllers writing its status, two sets of
claim templates, two owners of the same pods. Applying cdo's CRD over NVIDIA's replaces its
schema and labels, so the CRD itself cannot tell whose it is afterwards; what NVIDIA's Helm chart
installs beside it can: its DeviceClasses. A controller that finds one does not lead (the
process ends with the reason), so nothing is written until NVIDIA's driver is uninstalled
(docs/migrating.md).
"""

from __future__ import annotations

from collections.abc import Iterable

from shared.errors import FatalError
from shared.kube.client import KubeClient
from shared.kube.resources import DEVICE_CLASSES

NVIDIA_DEVICE_CLASSES = (
    "compute-domain-daemon.nvidia.com",
    "compute-domain-default-channel.nvidia.com",
)
"""The DeviceClasses NVIDIA's chart (``nvidia-dra-driver-gpu``) installs with ComputeDomains on."""


class NvidiaDriverInstalledError(FatalError):
    """NVIDIA's DRA driver for ComputeDomains runs in this cluster; cdo will not run beside it."""


def nvidia_installation(device_classes: Iterable[str]) -> str | None:
    """Why cdo must not run, given the names of the DeviceClasses found; None when it may."""
    found = sorted(set(device_classes) & set(NVIDIA_DEVICE_CLASSES))
    if not found:
        return None
    return (
        f"NVIDIA's DRA driver for ComputeDomains is installed (DeviceClass {', '.join(found)}): "
        "it serves the same CRD, computedomains.resource.nvidia.com, and both would act on "
        "every ComputeDomain. Uninstall it first (helm uninstall of nvidia-dra-driver-gpu, "
        "see cdo's docs/migrating.md); cdo does not start beside it"
    )


async def refuse_beside_nvidia(client: KubeClient) -> None:
    """Raise NvidiaDriverInstalledError when NVIDIA's driver is installed (a GET by name of each
    of its DeviceClasses, which RBAC allows by name)."""
    found = [
        name
        for name in NVIDIA_DEVICE_CLASSES
        if await client.get_or_none(DEVICE_CLASSES, name) is not None
    ]
    if (reason := nvidia_installation(found)) is not None:
        raise NvidiaDriverInstalledError(reason)
