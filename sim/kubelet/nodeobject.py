"""The Node a kubelet registers and the status it reports: pure functions of the topology node.

The kubelet owns these parts of its Node and nothing else: its labels listed in
:func:`node_labels` (never the clique labels, which belong to the health monitor),
``status.capacity``/``allocatable``/``addresses``/``nodeInfo`` and the four conditions in
``KUBELET_NODE_CONDITIONS``. Status is patched with a strategic merge patch, so conditions of
other writers (``cdo.dev/GpuHealthy``, ``cdo.dev/ImexReady``) are left alone.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from shared.kube.models import Condition
from sim.kubelet import names
from sim.kubelet.devices import GpuCount
from sim.kubelet.models import Node
from sim.kubelet.settings import KubeletSettings
from sim.kubelet.timefmt import rfc3339
from sim.topology import Node as TopologyNode

# (type, status, reason, message) of each condition a healthy kubelet reports.
_HEALTHY: tuple[tuple[str, str, str, str], ...] = (
    (
        names.MEMORY_PRESSURE,
        "False",
        "KubeletHasSufficientMemory",
        "kubelet has sufficient memory available",
    ),
    (names.DISK_PRESSURE, "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    (
        names.PID_PRESSURE,
        "False",
        "KubeletHasSufficientPID",
        "kubelet has sufficient PID available",
    ),
    (names.READY, "True", names.REASON_KUBELET_READY, "kubelet is posting ready status"),
)


def node_labels(
    node: TopologyNode, settings: KubeletSettings, extra: Mapping[str, str]
) -> dict[str, str]:
    """The labels the kubelet sets on registration: its own, the topology's for the node
    (``--node-labels``), then ``extra`` (so it may override)."""
    labels = {
        names.HOSTNAME_LABEL: node.name,
        names.OS_LABEL: "linux",
        names.ARCH_LABEL: settings.architecture,
        names.BETA_OS_LABEL: "linux",
        names.BETA_ARCH_LABEL: settings.architecture,
        names.INSTANCE_TYPE_LABEL: settings.instance_type,
        **node.labels,
    }
    labels.update(extra)
    return labels


def capacity(
    node: TopologyNode, settings: KubeletSettings, *, gpus: GpuCount | None = None
) -> dict[str, str]:
    """Capacity (and allocatable): the settings' amounts, the topology's overrides for the
    node on top, and ``nvidia.com/gpu`` only while the device manager has that resource
    (``gpus``: a device plugin serves it, or the kubelet lists the topology's GPUs)."""
    resources = settings.resources
    reported = {
        "cpu": resources.cpu,
        "memory": resources.memory,
        "pods": resources.pods,
        "ephemeral-storage": resources.ephemeral_storage,
        **node.allocatable,
    }
    if gpus is not None:
        reported[names.GPU_RESOURCE] = str(gpus.capacity)
    return reported


def allocatable(
    node: TopologyNode, settings: KubeletSettings, *, gpus: GpuCount | None = None
) -> dict[str, str]:
    """Capacity less the devices the device plugin reports unhealthy."""
    resources = capacity(node, settings, gpus=gpus)
    if gpus is not None:
        resources[names.GPU_RESOURCE] = str(gpus.allocatable)
    return resources


def taints(node: TopologyNode) -> list[dict[str, str]]:
    """The taints the node registers with (``--register-with-taints``), from the topology."""
    return [{"key": t.key, "value": t.value, "effect": t.effect} for t in node.taints]


def addresses(node: TopologyNode) -> list[dict[str, str]]:
    return [
        {"type": "InternalIP", "address": node.address},
        {"type": "Hostname", "address": node.name},
    ]


def machine_id(node: TopologyNode) -> str:
    """A stable 32-hex machine id (``/etc/machine-id`` form) derived from the node's name."""
    return hashlib.sha256(f"machine-id/{node.name}".encode()).hexdigest()[:32]


def node_info(node: TopologyNode, settings: KubeletSettings) -> dict[str, str]:
    return {
        "machineID": machine_id(node),
        "systemUUID": str(uuid.UUID(hex=machine_id(node))),
        "bootID": "",
        "kernelVersion": "6.8.0-sim",
        "osImage": "cdo simulated node",
        "containerRuntimeVersion": settings.container_runtime_version,
        "kubeletVersion": settings.kubelet_version,
        "kubeProxyVersion": "",
        "operatingSystem": "linux",
        "architecture": settings.architecture,
    }


def conditions(now: datetime, previous: tuple[Condition, ...]) -> list[dict[str, Any]]:
    """The kubelet's conditions as of ``now``; a transition time moves only when status does."""
    before = {c.type: c for c in previous}
    out: list[dict[str, Any]] = []
    for kind, status, reason, message in _HEALTHY:
        old = before.get(kind)
        transition = (
            old.last_transition_time
            if old is not None and old.status == status and old.last_transition_time
            else now
        )
        out.append(
            {
                "type": kind,
                "status": status,
                "reason": reason,
                "message": message,
                "lastHeartbeatTime": rfc3339(now),
                "lastTransitionTime": rfc3339(transition),
            }
        )
    return out


def status_body(
    node: TopologyNode,
    settings: KubeletSettings,
    *,
    now: datetime,
    previous: tuple[Condition, ...] = (),
    gpus: GpuCount | None = None,
) -> dict[str, Any]:
    """The node's ``status`` as its kubelet reports it (``gpus`` None: no nvidia.com/gpu)."""
    return {
        "capacity": capacity(node, settings, gpus=gpus),
        "allocatable": allocatable(node, settings, gpus=gpus),
        "addresses": addresses(node),
        "nodeInfo": node_info(node, settings),
        "conditions": conditions(now, previous),
    }


def registration_body(
    node: TopologyNode,
    settings: KubeletSettings,
    *,
    labels: Mapping[str, str],
    now: datetime,
    gpus: GpuCount | None = None,
) -> dict[str, Any]:
    """The Node object a kubelet creates when it registers."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node.name, "labels": node_labels(node, settings, labels)},
        "spec": {"taints": taints(node)} if node.taints else {},
        "status": status_body(node, settings, now=now, gpus=gpus),
    }


def status_is_current(
    current: Node,
    node: TopologyNode,
    settings: KubeletSettings,
    *,
    gpus: GpuCount | None = None,
) -> bool:
    """Whether the reported status already says what the kubelet would say (heartbeats aside)."""
    status = current.status
    if status.capacity != capacity(node, settings, gpus=gpus) or status.allocatable != allocatable(
        node, settings, gpus=gpus
    ):
        return False
    if [(a.type, a.address) for a in status.addresses] != [
        (a["type"], a["address"]) for a in addresses(node)
    ]:
        return False
    if (
        status.node_info.kubelet_version != settings.kubelet_version
        or status.node_info.machine_id != machine_id(node)
    ):
        return False
    reported = {c.type: (c.status, c.reason) for c in status.conditions}
    return all(reported.get(kind) == (state, reason) for kind, state, reason, _message in _HEALTHY)


def labels_are_current(
    current: Node, node: TopologyNode, settings: KubeletSettings, extra: Mapping[str, str]
) -> bool:
    labels = current.metadata.labels
    return all(labels.get(k) == v for k, v in node_labels(node, settings, extra).items())
