"""Kubernetes Events for notable transitions, as ``kubectl describe`` shows them.

Repeats of the same (object, reason, message) within ``aggregate_window_s`` update one Event's
``count`` and ``lastTimestamp`` instead of creating new ones, so a flapping condition cannot flood
the API. Recording is best effort: a failure is logged and counted, never raised, because an
Event must not stop a reconcile.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Literal

from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.meta import KubeObject
from shared.kube.resources import EVENTS, Resource
from shared.metrics import Metrics

log = logging.getLogger("cdo.kube.events")
EventType = Literal["Normal", "Warning"]


def _timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    """Records core/v1 Events on behalf of one component (service instance)."""

    def __init__(
        self,
        client: KubeClient,
        *,
        component: str,
        instance: str,
        metrics: Metrics | None = None,
        aggregate_window_s: float = 600.0,
    ) -> None:
        self._client = client
        self._component = component
        self._instance = instance
        self._metrics = metrics or Metrics()
        self._window = aggregate_window_s
        self._recent: dict[tuple[str, str, str], tuple[str, str, int, float]] = {}

    async def record(
        self,
        resource: Resource,
        obj: KubeObject,
        *,
        type_: EventType,
        reason: str,
        message: str,
    ) -> None:
        meta = obj.metadata
        namespace = meta.namespace or "default"
        key = (meta.uid or obj.key, reason, message)
        now = datetime.now(UTC)
        seen = self._recent.get(key)
        try:
            if seen is not None and time.monotonic() - seen[3] < self._window:
                name, event_namespace, count, _ = seen
                await self._client.patch(
                    EVENTS,
                    name,
                    {"count": count + 1, "lastTimestamp": _timestamp(now)},
                    namespace=event_namespace,
                )
                self._recent[key] = (name, event_namespace, count + 1, time.monotonic())
                return
            name = f"{meta.name}.{time.time_ns():x}"
            body = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": {
                    "apiVersion": resource.api_version,
                    "kind": resource.kind,
                    "name": meta.name,
                    "namespace": meta.namespace,
                    "uid": meta.uid,
                    "resourceVersion": meta.resource_version,
                },
                "type": type_,
                "reason": reason,
                "message": message[:1024],
                "source": {"component": self._component, "host": self._instance},
                "reportingComponent": f"cdo.dev/{self._component}",
                "reportingInstance": self._instance,
                "firstTimestamp": _timestamp(now),
                "lastTimestamp": _timestamp(now),
                "count": 1,
            }
            await self._client.create(EVENTS, body, namespace=namespace)
            self._recent[key] = (name, namespace, 1, time.monotonic())
            self._forget_old()
        except KubeApiError as exc:
            self._metrics.errors.labels("events").inc()
            log.warning("could not record event", extra={"reason": reason, "error": str(exc)})

    def _forget_old(self) -> None:
        horizon = time.monotonic() - self._window
        for key in [k for k, v in self._recent.items() if v[3] < horizon]:
            del self._recent[key]
