"""Apply a node's desired health to its Node object, idempotently (the API shell of nodepatch).

:meth:`NodeWriter.apply` compares the desired health with the Node it is given and writes only
what differs: the taint first (it is what moves workloads), then the condition, then the
labels. Annotations it is given (the fault's trace context, the circuit breaker's record) go
out with the taint write, or on their own when only they differ. The taint write carries the
read's resourceVersion; on a conflict the Node is read again and the diff recomputed, so a
kubelet or lifecycle controller writing its own taints in between is never overwritten. Every
write returns the Node as the server stored it, which becomes the base of the next one.
:class:`WriteBackoff` paces the attempts after a write failed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

import msgspec

from services.health_monitor.metrics import HealthMetrics
from services.health_monitor.nodepatch import (
    annotation_patch,
    condition_patch,
    label_patch,
    taint_patch,
)
from services.health_monitor.state import NodeHealth
from shared.crds.names import GPU_HEALTHY_CONDITION
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.models import Node
from shared.kube.resources import NODES

log = logging.getLogger("cdo.health_monitor")

_NODE = msgspec.json.Decoder(Node)


def utc_now() -> datetime:
    return datetime.now(UTC)


class NodeWriter:
    """Writes the fields the monitor owns on one Node."""

    def __init__(
        self,
        client: KubeClient,
        *,
        node_name: str,
        field_manager: str,
        metrics: HealthMetrics,
        conflict_retries: int = 5,
        wall_clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self._client = client
        self._name = node_name
        self._field_manager = field_manager
        self._metrics = metrics
        self._conflict_retries = conflict_retries
        self._wall_clock = wall_clock

    async def read(self) -> Node:
        """The Node as the server has it now (KubeApiError 404 while it does not exist)."""
        return _NODE.decode(await self._client.get(NODES, self._name))

    async def apply(
        self,
        health: NodeHealth,
        node: Node,
        *,
        annotations: Mapping[str, str | None] | None = None,
    ) -> Node:
        """Bring ``node`` to ``health``; the Node after the last write (``node`` if none).

        ``annotations`` (None removes one) go out with the taint when the taint changes, so a
        reader sees both in one version of the Node; otherwise on their own when they differ.
        """
        node = await self._apply_taints(health, node, annotations or {})
        patch = annotation_patch(node.metadata.annotations, annotations or {})
        if patch is not None:
            node = await self._write("annotations", patch)
        patch = condition_patch(
            node.condition(GPU_HEALTHY_CONDITION), health.condition, now=self._wall_clock()
        )
        if patch is not None:
            node = await self._write("condition", patch, subresource="status", strategic=True)
        patch = label_patch(node.metadata.labels, health.labels)
        if patch is not None:
            node = await self._write("labels", patch)
        return node

    async def _apply_taints(
        self, health: NodeHealth, node: Node, annotations: Mapping[str, str | None]
    ) -> Node:
        for attempt in range(self._conflict_retries + 1):
            patch = taint_patch(
                node.spec.taints,
                health.reaction,
                resource_version=node.metadata.resource_version,
                now=self._wall_clock(),
            )
            if patch is None:
                return node
            with_annotations = annotation_patch(node.metadata.annotations, annotations)
            if with_annotations is not None:
                patch["metadata"].update(with_annotations["metadata"])
            try:
                return await self._write("taints", patch)
            except KubeApiError as exc:
                if not exc.conflict or attempt == self._conflict_retries:
                    raise
                log.debug("taint write conflicted; reading again", extra={"node": self._name})
                node = await self.read()
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _write(
        self,
        field: str,
        patch: dict[str, object],
        *,
        subresource: str = "",
        strategic: bool = False,
    ) -> Node:
        try:
            body = await self._client.patch(
                NODES,
                self._name,
                patch,
                subresource=subresource,
                patch_type="strategic" if strategic else "merge",
                field_manager=self._field_manager,
            )
        except KubeApiError as exc:
            self._metrics.node_writes.labels(field, "conflict" if exc.conflict else "error").inc()
            raise
        self._metrics.node_writes.labels(field, "ok").inc()
        return _NODE.decode(body)


class WriteBackoff:
    """When the next Node write may be tried after failures: doubling pauses, capped."""

    def __init__(self, *, first_s: float, max_s: float) -> None:
        self._first_s = first_s
        self._max_s = max_s
        self._pause = first_s
        self.retry_at: float | None = None  # no write before this (monotonic), None: any time

    def waiting(self, now: float) -> bool:
        return self.retry_at is not None and now < self.retry_at

    def failed(self, *, now: float, retry_after_s: float) -> float:
        """Record a failure at ``now``; the pause it was given."""
        pause = self._pause
        self.retry_at = now + max(pause, retry_after_s)
        self._pause = min(pause * 2, self._max_s)
        return pause

    def succeeded(self) -> None:
        self._pause = self._first_s
        self.retry_at = None
