"""What the kubelet answers on its PodResources socket: its pods and their devices.

``List`` returns every pod bound to the node that has not finished, each container with the
``nvidia.com/gpu`` devices the device manager assigned to it; ``GetAllocatableResources`` the
healthy devices. DRA devices (``dynamic_resources``) are not reported by this kubelet.
"""

from __future__ import annotations

from collections.abc import Callable

from shared.kube.keys import key_of
from shared.kubeletapi.podresources import ContainerResources, Devices, PodResources
from sim.kubelet import names
from sim.kubelet.devices import DeviceManager
from sim.kubelet.models import Pod


class KubeletPodResources:
    """A ``PodResourcesSource`` over one kubelet session's pods and its device manager."""

    def __init__(self, *, pods: Callable[[], list[Pod]], devices: DeviceManager) -> None:
        self._pods = pods
        self._devices = devices

    def pod_resources(self) -> list[PodResources]:
        out: list[PodResources] = []
        for pod in self._pods():
            if pod.status.phase in names.TERMINAL_PHASES:
                continue
            record = self._devices.assigned(key_of(pod), pod.metadata.uid)
            assigned = record.containers if record is not None else {}
            containers = tuple(
                ContainerResources(
                    name=container.name,
                    devices=(
                        Devices(resource=self._devices.resource, ids=assigned[container.name]),
                    )
                    if container.name in assigned
                    else (),
                )
                for container in pod.spec.containers
            )
            out.append(
                PodResources(
                    namespace=pod.metadata.namespace, name=pod.metadata.name, containers=containers
                )
            )
        return out

    def allocatable_devices(self) -> list[Devices]:
        return self._devices.allocatable_devices()
