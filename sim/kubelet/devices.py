"""The kubelet's device manager for ``nvidia.com/gpu``, with NVIDIA's device plugin's device list.

NVIDIA's device plugin lists one device per GPU, its ID the GPU's UUID, and reports a GPU
``Unhealthy`` after an XID it treats as fatal (``sim.deviceplugin.health``). The kubelet's
device manager hands healthy, free devices to each container that asks for ``nvidia.com/gpu``
(lowest NVML index first), keeps the assignment in its checkpoint so that a restarted kubelet
still knows it, frees it when the pod ends, and reports ``allocatable`` as the number of
healthy devices (``capacity`` stays the number of devices). Here the device list comes from
the topology (the GPUs and UUIDs the simulated NVML of the node has); health comes in through
:meth:`DeviceManager.set_health`.

A container whose request cannot be met from healthy, free devices fails its admission
(:class:`DeviceAllocationError`); the real kubelet fails the pod (UnexpectedAdmissionError),
this one shows the error on the pending pod and retries.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from shared.errors import CdoError
from shared.kube.keys import ObjectKey
from shared.kubeletapi.podresources import Devices
from sim.kubelet.models import Pod
from sim.kubelet.names import GPU_RESOURCE
from sim.topology import Node as TopologyNode

HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"


class DeviceAllocationError(CdoError):
    """Not enough healthy, free devices for a container (the pod's admission fails)."""


@dataclass
class PodDevices:
    """The devices assigned to one pod's containers (container name -> device IDs)."""

    pod_uid: str
    containers: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def ids(self) -> set[str]:
        return {device for ids in self.containers.values() for device in ids}


@dataclass
class DeviceCheckpoint:
    """What the device manager keeps on the node's disk: assignments by pod key."""

    pods: dict[ObjectKey, PodDevices] = field(default_factory=dict)


def requested(pod: Pod, resource: str = GPU_RESOURCE) -> list[tuple[str, int]]:
    """(container, count) of every container asking for ``resource`` (limits win)."""
    out: list[tuple[str, int]] = []
    for container in pod.spec.containers:
        value = container.resources.limits.get(resource) or container.resources.requests.get(
            resource
        )
        if value and int(value) > 0:
            out.append((container.name, int(value)))
    return out


def pick(free: Sequence[str], count: int) -> tuple[str, ...] | None:
    """The first ``count`` of ``free`` (device order), or None when there are fewer."""
    return tuple(free[:count]) if len(free) >= count else None


class DeviceManager:
    """``nvidia.com/gpu`` devices of one node: their health and who holds them."""

    def __init__(
        self,
        node: TopologyNode,
        *,
        checkpoint: DeviceCheckpoint,
        on_health_change: Callable[[], None] = lambda: None,
    ) -> None:
        self.resource = GPU_RESOURCE
        self._ids = tuple(gpu.uuid for gpu in node.gpus)  # NVML index order
        self._health = dict.fromkeys(self._ids, HEALTHY)
        self._checkpoint = checkpoint
        self._on_health_change = on_health_change

    @property
    def device_ids(self) -> tuple[str, ...]:
        return self._ids

    def healthy(self) -> tuple[str, ...]:
        return tuple(device for device in self._ids if self._health[device] == HEALTHY)

    def health(self, device: str) -> str:
        return self._health[device]

    def set_health(self, device: str, health: str) -> None:
        """A device plugin's ListAndWatch said ``device`` is now ``health``."""
        if device not in self._health:
            raise KeyError(f"{self.resource} device {device!r} is not on this node")
        if self._health[device] != health:
            self._health[device] = health
            self._on_health_change()

    def capacity(self) -> int:
        return len(self._ids)

    def allocatable(self) -> int:
        return len(self.healthy())

    # -- assignment -----------------------------------------------------------------------------

    def assigned(self, key: ObjectKey, pod_uid: str) -> PodDevices | None:
        record = self._checkpoint.pods.get(key)
        return record if record is not None and record.pod_uid == pod_uid else None

    def allocate(self, key: ObjectKey, pod: Pod) -> PodDevices:
        """The pod's devices: those assigned before, or new ones (DeviceAllocationError)."""
        record = self.assigned(key, pod.metadata.uid)
        if record is not None:
            return record
        used = {device for other in self._checkpoint.pods.values() for device in other.ids}
        free = [device for device in self.healthy() if device not in used]
        record = PodDevices(pod_uid=pod.metadata.uid)
        for container, count in requested(pod, self.resource):
            chosen = pick(free, count)
            if chosen is None:
                raise DeviceAllocationError(
                    f"Allocate failed due to requested number of devices unavailable for "
                    f"{self.resource}. Requested: {count}, Available: {len(free)}"
                )
            record.containers[container] = chosen
            free = [device for device in free if device not in chosen]
        if record.containers:
            self._checkpoint.pods[key] = record
        return record

    def free(self, key: ObjectKey) -> None:
        """The pod at ``key`` ended: its devices go back."""
        self._checkpoint.pods.pop(key, None)

    def holders(self) -> Iterable[tuple[ObjectKey, PodDevices]]:
        return tuple(self._checkpoint.pods.items())

    def allocatable_devices(self) -> list[Devices]:
        healthy = self.healthy()
        return [Devices(resource=self.resource, ids=healthy)] if healthy else []
