"""The monitor's view of Nodes: the one Node it watches, which of two observations of its own
Node is newer (its writes and watch events race), and the writer of its own Node."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from services.health_monitor.metrics import HealthMetrics
from services.health_monitor.settings import MonitorSettings
from services.health_monitor.writer import NodeWriter
from shared.kube.client import KubeClient
from shared.kube.informer import Informer
from shared.kube.models import Node
from shared.kube.resources import NODES
from shared.metrics import Metrics


def _version(node: Node) -> int | None:
    version = node.metadata.resource_version
    return int(version) if version.isdigit() else None


def newer(known: Node | None, seen: Node) -> Node:
    """The later of two observations of the Node (writes and watch events race)."""
    if known is None or known.metadata.uid != seen.metadata.uid:
        return seen
    old, new = _version(known), _version(seen)
    if old is not None and new is not None and new < old:
        return known
    return seen


def node_informer(
    client: KubeClient, *, node_name: str, settings: MonitorSettings, metrics: Metrics
) -> Informer[Node]:
    """This node's Node, and no other: what the monitor reads does not grow with the cluster
    (the circuit breaker's answers come on this Node too)."""
    return Informer(
        client,
        NODES,
        Node,
        field_selector=f"metadata.name={node_name}",
        settings=settings.informer,
        metrics=metrics,
    )


def node_writer(
    client: KubeClient,
    *,
    node_name: str,
    settings: MonitorSettings,
    metrics: HealthMetrics,
    wall: Callable[[], datetime],
) -> NodeWriter:
    return NodeWriter(
        client,
        node_name=node_name,
        field_manager=settings.field_manager,
        metrics=metrics,
        conflict_retries=settings.conflict_retries,
        wall_clock=wall,
    )
