"""What a node's GPU-confined faults ask of each GPU: pure decisions, no I/O.

- :func:`publishing`: how the node's GPUs reach pods, which says how to act on one GPU:
  ``dra`` when NVIDIA's GPU DRA driver (``gpu.nvidia.com``) publishes a ResourceSlice for the
  node and the server serves DeviceTaintRule, ``device-plugin`` when the Node has
  ``nvidia.com/gpu`` capacity and the kubelet's PodResources API is at hand, None otherwise
  (then every fault is node-level, ``scope``). A node whose GPUs reach pods through DRA on a
  server without DeviceTaintRule is None even when it also has device-plugin GPUs: evicting the
  device plugin's holders would leave the DRA claims of the faulted GPU running.
- :func:`hold`: each GPU keeps its reaction for ``hold_down_s`` after the faults stopped asking
  for it, as the node's taint does (``state``), so a flapping GPU keeps one device taint.
- :func:`desired_rules`: the DeviceTaintRules the node should have: one per GPU with a
  reaction, named by :func:`rule_name` (node and GPU), selecting the driver's device
  ``gpu-<index>`` in the pool named after the node; NoExecute for fatal, NoSchedule otherwise.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from services.health_monitor.faults import Reaction
from shared.crds.names import GPU_DEVICE_TAINT, GPU_DRA_DRIVER, gpu_device_name
from shared.kube.models import Node, ResourceSlice

GPU_RESOURCE = "nvidia.com/gpu"
RULE_NODE_LABEL = "cdo.dev/gpu-fault-node"
"""Label on the monitor's DeviceTaintRules: the node they are about (a restart relists them)."""
RULE_PREFIX = "cdo-gpu-fault"
TAINT_VALUES = {Reaction.NO_SCHEDULE: "warning", Reaction.NO_EXECUTE: "fatal"}


class Publishing(enum.StrEnum):
    DEVICE_PLUGIN = "device-plugin"
    DRA = "dra"


def publishing(
    node: Node | None,
    slices: Iterable[ResourceSlice],
    *,
    pod_resources: bool,
    device_taint_rules: bool,
) -> Publishing | None:
    """How one GPU of the node can be acted on (DRA wins when both are seen)."""
    name = node.metadata.name if node is not None else None
    if any(s.spec.driver == GPU_DRA_DRIVER and s.spec.node_name == name for s in slices):
        return Publishing.DRA if device_taint_rules else None
    if node is not None and pod_resources and int(node.status.capacity.get(GPU_RESOURCE, "0")) > 0:
        return Publishing.DEVICE_PLUGIN
    return None


class GpuHold(msgspec.Struct, frozen=True, kw_only=True):
    """When each GPU last needed NoSchedule and NoExecute (monotonic seconds)."""

    no_schedule: Mapping[int, float] = msgspec.field(default_factory=dict)
    no_execute: Mapping[int, float] = msgspec.field(default_factory=dict)


def hold(
    before: GpuHold, wanted: Mapping[int, Reaction], *, now: float, hold_down_s: float
) -> tuple[GpuHold, dict[int, Reaction]]:
    """The GPUs' memory after an evaluation at ``now``, and each GPU's reaction to show."""
    no_schedule = dict(before.no_schedule)
    no_execute = dict(before.no_execute)
    for gpu, reaction in wanted.items():
        if reaction >= Reaction.NO_SCHEDULE:
            no_schedule[gpu] = now
        if reaction >= Reaction.NO_EXECUTE:
            no_execute[gpu] = now
    no_schedule = {g: t for g, t in no_schedule.items() if now - t < hold_down_s or g in wanted}
    no_execute = {g: t for g, t in no_execute.items() if now - t < hold_down_s or g in wanted}
    shown = dict.fromkeys(no_schedule, Reaction.NO_SCHEDULE)
    shown.update(dict.fromkeys(no_execute, Reaction.NO_EXECUTE))
    return GpuHold(no_schedule=no_schedule, no_execute=no_execute), shown


def next_release(held: GpuHold, *, hold_down_s: float) -> float | None:
    """When the next GPU's hold-down ends, if any GPU is held."""
    moments = [*held.no_schedule.values(), *held.no_execute.values()]
    return min(moments) + hold_down_s if moments else None


def rule_name(node: str, gpu: int) -> str:
    return f"{RULE_PREFIX}-{node}-{gpu_device_name(gpu)}"


def rule_body(node: str, gpu: int, reaction: Reaction) -> dict[str, Any]:
    """The DeviceTaintRule that taints GPU ``gpu`` of ``node`` with ``reaction``."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": rule_name(node, gpu), "labels": {RULE_NODE_LABEL: node}},
        "spec": {
            "deviceSelector": {
                "driver": GPU_DRA_DRIVER,
                "pool": node,
                "device": gpu_device_name(gpu),
            },
            "taint": {
                "key": GPU_DEVICE_TAINT,
                "value": TAINT_VALUES[reaction],
                "effect": reaction.effect,
            },
        },
    }


def desired_rules(node: str, shown: Mapping[int, Reaction]) -> dict[str, dict[str, Any]]:
    """Rule name -> body of every DeviceTaintRule the node should have."""
    return {
        rule_name(node, gpu): rule_body(node, gpu, reaction)
        for gpu, reaction in shown.items()
        if reaction > Reaction.NONE
    }
