"""The API objects the kubelet reads, with the few fields beyond ``shared.kube.models``."""

from __future__ import annotations

from datetime import datetime

import msgspec

from shared.kube import models
from shared.kube.meta import KubeObject


class _Camel(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    pass


class ContainerStatus(_Camel, frozen=True, kw_only=True):
    name: str
    ready: bool = False
    container_id: str = msgspec.field(default="", name="containerID")


class PodSpec(models.PodSpec, frozen=True, kw_only=True):
    restart_policy: str = "Always"
    host_network: bool = False


class PodStatus(models.PodStatus, frozen=True, kw_only=True):
    start_time: datetime | None = None
    host_ip: str = msgspec.field(default="", name="hostIP")
    pod_ip: str = msgspec.field(default="", name="podIP")
    container_statuses: tuple[ContainerStatus, ...] = ()


class Pod(models.Pod, frozen=True, kw_only=True):
    """A pod as the kubelet sees it."""

    spec: PodSpec = msgspec.field(default_factory=PodSpec)
    status: PodStatus = msgspec.field(default_factory=PodStatus)


class NodeInfo(models.NodeSystemInfo, frozen=True, kw_only=True):
    architecture: str = ""
    machine_id: str = msgspec.field(default="", name="machineID")


class NodeStatus(models.NodeStatus, frozen=True, kw_only=True):
    node_info: NodeInfo = msgspec.field(default_factory=NodeInfo)


class Node(models.Node, frozen=True, kw_only=True):
    """A node as its kubelet and the lifecycle controller see it."""

    status: NodeStatus = msgspec.field(default_factory=NodeStatus)


class LeaseSpec(_Camel, frozen=True, kw_only=True):
    holder_identity: str = ""
    lease_duration_seconds: int = 0
    renew_time: datetime | None = None


class Lease(KubeObject, frozen=True, kw_only=True):
    """A node's heartbeat Lease in kube-node-lease."""

    spec: LeaseSpec = msgspec.field(default_factory=LeaseSpec)
