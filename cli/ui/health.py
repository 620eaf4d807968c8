"""What the page marks on a tray and its GPUs: faults, cordons, taints, readiness (pure).

The truth is the Node as the health monitor, the IMEX agent and the kubelet write it:

- GPUs named in the ``cdo.dev/GpuHealthy`` condition's message (``GPU 2: XID 79: ...``, the
  monitor's listing of active faults) are **faulty** while the condition reports a fault
  (``GpuFault``, ``GpuDegraded``, ``CircuitBreakerOpen``; ``GpuDeviceFault`` for a fault
  confined to one GPU, whose GPUs the message names after ``confined to GPU``), and marked as a
  **warning** under ``GpuWarning``; a node-level fault names no GPU and marks the tray;
- tray marks: the fault taint ``cdo.dev/gpu-fault``, any other taint, a cordon
  (``spec.unschedulable``), NotReady, ``cdo.dev/ImexReady`` not True, GPU health unknown.

The event feed is faster than the API: a ``NodeFault`` on NATS marks its GPU (or its tray, for a
node-wide fault) at once, before the Node is written. :class:`FeedFaults` keeps those marks until
the node's ``NodeRecovered``, or for :data:`FEED_FAULT_TTL_S` at most: by then the Node says the
same, or the API knows better and the page shows what it says.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import msgspec

from shared.crds.names import GPU_FAULT_TAINT, GPU_HEALTHY_CONDITION, IMEX_READY_CONDITION
from shared.events import Event, NodeFault, NodeRecovered
from shared.kube.models import Node

NAMED_GPU = re.compile(r"\bGPU (\d+):")
CONFINED = re.compile(r"confined to GPU ([\d, ]+)")
FAULT_REASONS = frozenset({"GpuFault", "GpuDegraded", "CircuitBreakerOpen"})
CONFINED_REASON = "GpuDeviceFault"
WARNING_REASON = "GpuWarning"
LIFECYCLE_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
FEED_FAULT_TTL_S = 30.0

FAULTY = "faulty"
WARNING = "warning"


class Mark(msgspec.Struct, frozen=True, array_like=True):
    """A tray mark: a one-letter code drawn on the tray and the words it stands for."""

    code: str
    text: str


def gpu_faults(node: Node) -> dict[int, str]:
    """GPU index -> :data:`FAULTY` or :data:`WARNING`, from the GpuHealthy condition."""
    condition = node.condition(GPU_HEALTHY_CONDITION)
    if condition is None:
        return {}
    if condition.reason == CONFINED_REASON:
        confined = CONFINED.search(condition.message)
        if confined is not None:
            return {int(i): FAULTY for i in re.findall(r"\d+", confined.group(1))}
    if condition.reason in FAULT_REASONS or condition.reason == CONFINED_REASON:
        return {int(i): FAULTY for i in NAMED_GPU.findall(condition.message)}
    if condition.reason == WARNING_REASON:
        return {int(i): WARNING for i in NAMED_GPU.findall(condition.message)}
    return {}


def _is_true(node: Node, kind: str) -> bool | None:
    condition = node.condition(kind)
    return None if condition is None else condition.status == "True"


def tray_marks(node: Node, *, faulty_gpus: Iterable[int] = ()) -> list[Mark]:
    """The tray's marks, most serious first."""
    marks: list[Mark] = []
    taints = node.spec.taints
    fault = [t for t in taints if t.key == GPU_FAULT_TAINT]
    if fault:
        marks.append(Mark("F", f"fault taint {GPU_FAULT_TAINT}={fault[0].value}:{fault[0].effect}"))
    elif faulty := sorted(set(faulty_gpus)):
        marks.append(Mark("F", "GPU fault on GPU " + ", ".join(str(i) for i in faulty)))
    if _is_true(node, "Ready") is not True:
        marks.append(Mark("N", "NotReady"))
    imex = node.condition(IMEX_READY_CONDITION)
    if imex is not None and imex.status != "True":
        marks.append(Mark("I", f"IMEX not ready ({imex.reason})"))
    health = node.condition(GPU_HEALTHY_CONDITION)
    if health is not None and health.status == "Unknown":
        marks.append(Mark("?", f"GPU health unknown ({health.reason})"))
    if node.spec.unschedulable:
        marks.append(Mark("C", "cordoned"))
    other = [t for t in taints if t.key != GPU_FAULT_TAINT and t.key not in LIFECYCLE_TAINTS]
    if other:
        marks.append(
            Mark("T", "taints " + ", ".join(f"{t.key}:{t.effect}" for t in other)),
        )
    return marks


class FeedFault(msgspec.Struct, frozen=True, kw_only=True):
    gpu: int | None
    """None: the whole node."""
    severity: str
    message: str
    at: float


class FeedFaults:
    """Faults the feed reported that the page shows before the API says so."""

    def __init__(self, *, ttl_s: float = FEED_FAULT_TTL_S) -> None:
        self._ttl_s = ttl_s
        self._by_node: dict[str, list[FeedFault]] = {}

    def apply(self, event: Event, *, now: float) -> bool:
        """Take a feed event (``now``: the wall clock, as the event's time); whether the marks
        changed. A fault older than the TTL (from the stream's history) marks nothing."""
        if isinstance(event, NodeFault):
            at = event.time.timestamp()
            if now - at >= self._ttl_s:
                return False
            fault = FeedFault(
                gpu=event.gpu_index,
                severity=event.severity,
                message=event.message or f"{event.signal} {event.code}",
                at=at,
            )
            self._by_node.setdefault(event.node, []).append(fault)
            return True
        if isinstance(event, NodeRecovered):
            return self._by_node.pop(event.node, None) is not None
        return False

    def expire(self, *, now: float) -> bool:
        """Forget marks older than the TTL; whether any went."""
        changed = False
        for node in list(self._by_node):
            kept = [f for f in self._by_node[node] if now - f.at < self._ttl_s]
            if len(kept) != len(self._by_node[node]):
                changed = True
                if kept:
                    self._by_node[node] = kept
                else:
                    del self._by_node[node]
        return changed

    def of(self, node: str) -> list[FeedFault]:
        return self._by_node.get(node, [])

    def __bool__(self) -> bool:
        return bool(self._by_node)
