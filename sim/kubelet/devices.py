"""The kubelet's device manager for ``nvidia.com/gpu``: the device list, its health, who holds what.

The device list and each device's health come from the device plugin registered for
``nvidia.com/gpu`` (:meth:`DeviceManager.update`, fed by its ListAndWatch stream through
:mod:`sim.kubelet.deviceplugins`; NVIDIA's plugin lists one device per GPU by UUID and reports
a GPU ``Unhealthy`` after an XID it treats as fatal, ``sim.deviceplugin``). Before any plugin
registered, the ``topology`` source (``KubeletSettings.gpu_devices``) lists the node's GPUs
healthy, as though the plugin had, for clusters run without one; the ``plugin`` source lists
nothing, as a real kubelet does. A plugin whose stream ends leaves every device ``Unhealthy``
(:meth:`DeviceManager.plugin_gone`) until it registers again.

The device manager hands healthy, free devices to each container that asks for
``nvidia.com/gpu`` (lowest index first; it does not ask the plugin for a preferred allocation),
keeps the assignment in its checkpoint so that a restarted kubelet still knows it, frees it
when the pod ends, and reports ``allocatable`` as the number of healthy devices (``capacity``:
every device listed).

A container whose request cannot be met from healthy, free devices fails its admission
(:class:`DeviceAllocationError`); the real kubelet fails the pod (UnexpectedAdmissionError),
this one shows the error on the pending pod and retries.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from shared.errors import CdoError
from shared.kube.keys import ObjectKey
from shared.kubeletapi.deviceplugin import HEALTHY, UNHEALTHY, ContainerAllocation, Device
from shared.kubeletapi.podresources import Devices
from sim.kubelet.models import Pod
from sim.kubelet.names import GPU_RESOURCE
from sim.topology import Node as TopologyNode


class DeviceAllocationError(CdoError):
    """Not enough healthy, free devices for a container (the pod's admission fails)."""


@dataclass
class PodDevices:
    """The devices assigned to one pod's containers (container name -> device IDs)."""

    pod_uid: str
    containers: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # What the plugin's Allocate answered for each container (the real checkpoint keeps it too).
    allocations: dict[str, ContainerAllocation] = field(default_factory=dict)

    @property
    def ids(self) -> set[str]:
        return {device for ids in self.containers.values() for device in ids}


@dataclass
class DeviceCheckpoint:
    """What the device manager keeps on the node's disk: assignments by pod key."""

    pods: dict[ObjectKey, PodDevices] = field(default_factory=dict)


class GpuCount(NamedTuple):
    """``nvidia.com/gpu`` as the node reports it: every device listed, and the healthy ones."""

    capacity: int
    allocatable: int


GpuSource = Literal["topology", "plugin"]


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
        source: GpuSource = "topology",
        on_health_change: Callable[[], None] = lambda: None,
    ) -> None:
        self.resource = GPU_RESOURCE
        # A node whose GPUs only NVIDIA's DRA driver publishes runs no device plugin.
        self._topology = tuple(gpu.uuid for gpu in node.gpus) if node.device_plugin else None
        self._source = source
        self._ids: tuple[str, ...] = ()
        self._health: dict[str, str] = {}
        self._known = False  # whether the node reports the resource at all
        self._checkpoint = checkpoint
        self._on_health_change = on_health_change
        self.reboot()

    @property
    def device_ids(self) -> tuple[str, ...]:
        return self._ids

    def healthy(self) -> tuple[str, ...]:
        return tuple(device for device in self._ids if self._health[device] == HEALTHY)

    def health(self, device: str) -> str:
        return self._health[device]

    def set_health(self, device: str, health: str) -> None:
        """``device`` is now ``health`` (what one ListAndWatch update says of one device)."""
        if device not in self._health:
            raise KeyError(f"{self.resource} device {device!r} is not on this node")
        self.update([Device(id=d, health=health if d == device else h) for d, h in self._listed()])

    def update(self, devices: Sequence[Device]) -> None:
        """The plugin's device list now replaces the manager's (ListAndWatch)."""
        ids = tuple(dict.fromkeys(device.id for device in devices))
        health = {device.id: device.health for device in devices}
        changed = not self._known or ids != self._ids or health != self._health
        self._ids, self._health, self._known = ids, health, True
        if changed:
            self._on_health_change()

    def plugin_gone(self) -> None:
        """The plugin's stream ended: every device Unhealthy until it registers again."""
        self.update([Device(id=device, health=UNHEALTHY) for device in self._ids])

    def reboot(self) -> None:
        """A (re)started kubelet: the topology's GPUs, all healthy (``topology`` source), or
        no devices until the plugin registers again (``plugin``; a resource the node reported
        before stays at 0, as the kubelet's checkpoint remembers it)."""
        if self._source == "topology" and self._topology is not None:
            self.update([Device(id=device) for device in self._topology])
        elif self._known:
            self.update([])

    def _listed(self) -> list[tuple[str, str]]:
        return [(device, self._health[device]) for device in self._ids]

    def counts(self) -> GpuCount | None:
        """Capacity and allocatable, None while the node does not report the resource."""
        if not self._known:
            return None
        return GpuCount(capacity=len(self._ids), allocatable=len(self.healthy()))

    def capacity(self) -> int:
        return len(self._ids)

    def allocatable(self) -> int:
        return len(self.healthy())

    # -- assignment -----------------------------------------------------------------------------

    def assigned(self, key: ObjectKey, pod_uid: str) -> PodDevices | None:
        record = self._checkpoint.pods.get(key)
        return record if record is not None and record.pod_uid == pod_uid else None

    def free_devices(self) -> list[str]:
        """Healthy devices no pod holds, in device order."""
        used = {device for other in self._checkpoint.pods.values() for device in other.ids}
        return [device for device in self.healthy() if device not in used]

    def allocate(self, key: ObjectKey, pod: Pod) -> PodDevices:
        """The pod's devices: those assigned before, or new ones (DeviceAllocationError)."""
        record = self.assigned(key, pod.metadata.uid)
        if record is not None:
            return record
        free = self.free_devices()
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
