"""The reactions on single GPUs of one node: the thin I/O shell around ``gpuplan``.

    reactor = GpuReactor(node_name=name, client=client, pod_resources=PodResourcesClient(),
                         settings=settings, metrics=metrics, on_change=dirty.set)
    group.create_task(reactor.run())                    # its two informers
    reactor.can_confine(node)                           # scope.confine(..., enabled=...)
    await reactor.apply(faults, node=node, uuids=uuids, now=now)   # each reconcile

How a GPU-confined fault reacts depends on how the node's GPUs reach pods (``gpuplan``):

- **DRA** (``gpu.nvidia.com`` publishes the node's GPUs, and the server serves DeviceTaintRule:
  Kubernetes 1.37 on; before, every fault of such a node is node-level, ``scope``, and the
  presence of the API is rechecked so an upgrade is used without a restart): a cluster-scoped
  DeviceTaintRule per
  faulted GPU, NoExecute for fatal faults, NoSchedule for warnings that need the GPU, kept for
  the hold-down after the fault, then deleted. The scheduler keeps new claims off the device;
  kube-controller-manager's device taint eviction controller evicts the pods of NoExecute.
  The rules carry the ``cdo.dev/gpu-fault-node`` label; an informer on it is the monitor's
  memory of them, so a restarted monitor finds (and corrects) what it wrote before.
- **device plugin** (``nvidia.com/gpu``): while a fatal fault lasts, every pod the kubelet's
  PodResources API shows holding the GPU (by its UUID) is evicted through the Eviction API, so
  disruption budgets hold (a 429 is tried again). Warnings do nothing more than the condition
  and the event: NVIDIA's device plugin takes a GPU it finds unhealthy out of allocatable.

A failed call is counted and tried again after ``write_retry_s`` (:attr:`retry_at`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from services.health_monitor.faults import Fault, Reaction
from services.health_monitor.gpuplan import (
    GPU_RESOURCE,
    RULE_NODE_LABEL,
    GpuHold,
    Publishing,
    desired_rules,
    hold,
    next_release,
    publishing,
)
from services.health_monitor.metrics import HealthMetrics
from services.health_monitor.scope import gpu_reactions
from services.health_monitor.settings import MonitorSettings
from shared.crds.names import GPU_DRA_DRIVER
from shared.kube.apis import DEVICE_TAINT_RULES_API
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.informer import Informer
from shared.kube.models import DeviceTaintRule, Node, ResourceSlice
from shared.kube.presence import ApiPresence
from shared.kube.resources import DEVICE_TAINT_RULES, PODS, RESOURCE_SLICES
from shared.kubeletapi.errors import KubeletApiError
from shared.kubeletapi.podresources import PodResourcesClient
from shared.metrics import Metrics

log = logging.getLogger("cdo.health_monitor")


class GpuReactor:
    """Device taints and per-GPU evictions of one node."""

    def __init__(
        self,
        *,
        node_name: str,
        client: KubeClient,
        pod_resources: PodResourcesClient | None,
        settings: MonitorSettings,
        metrics: HealthMetrics,
        registry: Metrics,
        on_change: Callable[[], None],
    ) -> None:
        self._node = node_name
        self._client = client
        self._pod_resources = pod_resources
        self._settings = settings
        self._metrics = metrics
        self.rules_api = ApiPresence(
            client,
            DEVICE_TAINT_RULES_API,
            recheck_s=settings.informer.optional_api_recheck_s,
            metrics=registry,
            on_change=on_change,
        )
        self.rules = Informer(
            client,
            DEVICE_TAINT_RULES,
            DeviceTaintRule,
            label_selector=f"{RULE_NODE_LABEL}={node_name}",
            settings=settings.informer,
            metrics=registry,
            presence=self.rules_api,
        )
        self.slices = Informer(
            client,
            RESOURCE_SLICES,
            ResourceSlice,
            field_selector=f"spec.nodeName={node_name},spec.driver={GPU_DRA_DRIVER}",
            settings=settings.informer,
            metrics=registry,
        )
        for informer in (self.rules, self.slices):
            informer.add_handler(lambda _old, _new: on_change())
        self._hold = GpuHold()
        self._evicting: set[tuple[str, str]] = set()  # pods asked to go for the current faults
        self.retry_at: float | None = None
        self.shown: dict[int, Reaction] = {}  # each GPU's reaction after the last apply

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self.rules_api.run(), name=f"health rules presence {self._node}")
            group.create_task(self.rules.run(), name=f"health device taint rules {self._node}")
            group.create_task(self.slices.run(), name=f"health gpu slices {self._node}")

    def mode(self, node: Node | None) -> Publishing | None:
        return publishing(
            node,
            self.slices.cache.objects(),
            pod_resources=self._pod_resources is not None,
            device_taint_rules=self.rules_api.served,
        )

    def can_confine(self, node: Node | None) -> bool:
        """Whether faults may stay on their GPU: there is a way to act on one GPU."""
        return self._settings.per_gpu_faults and self.mode(node) is not None

    def deadline(self) -> float | None:
        moments = [next_release(self._hold, hold_down_s=self._settings.hold_down_s), self.retry_at]
        found = [moment for moment in moments if moment is not None]
        return min(found) if found else None

    async def apply(
        self, faults: Sequence[Fault], *, node: Node | None, uuids: Mapping[int, str], now: float
    ) -> None:
        """Bring the node's GPUs to what their confined faults ask, at ``now``."""
        if self.retry_at is not None and now < self.retry_at:
            return
        wanted = gpu_reactions(faults)
        self._hold, self.shown = hold(
            self._hold, wanted, now=now, hold_down_s=self._settings.hold_down_s
        )
        mode = self.mode(node)
        fatal = {gpu for gpu, reaction in wanted.items() if reaction is Reaction.NO_EXECUTE}
        try:
            shown = self.shown if mode is Publishing.DRA else {}
            await self._apply_rules(desired_rules(self._node, shown))
            done = mode is not Publishing.DEVICE_PLUGIN or await self._evict_holders(fatal, uuids)
        except (KubeApiError, KubeletApiError) as exc:
            self._metrics.errors.labels("health-gpu").inc()
            self.retry_at = now + self._settings.write_retry_s
            log.warning(
                "could not act on a GPU's fault; retrying",
                extra={"node": self._node, "error": str(exc)},
            )
            return
        # A pod a disruption budget kept is asked again after the pause.
        self.retry_at = None if done else now + self._settings.write_retry_s

    # -- DRA: DeviceTaintRules ----------------------------------------------------------------

    async def _apply_rules(self, desired: Mapping[str, dict[str, Any]]) -> None:
        if not self.rules.synced:
            return  # what exists is not known yet; the informer's sync comes back here
        current = {rule.metadata.name: rule for rule in self.rules.cache.objects()}
        for name, body in desired.items():
            rule = current.get(name)
            if rule is None:
                await self._client.create(DEVICE_TAINT_RULES, body)
                self._count("rule_created")
                log.info("device taint rule created", extra={"node": self._node, "rule": name})
            elif _taint(rule) != body["spec"]["taint"]:
                patch = {"spec": {"taint": body["spec"]["taint"]}}
                await self._client.patch(DEVICE_TAINT_RULES, name, patch)
                self._count("rule_updated")
        for name in current.keys() - desired.keys():
            try:
                await self._client.delete(DEVICE_TAINT_RULES, name)
            except KubeApiError as exc:
                if not exc.not_found:
                    raise
            self._count("rule_deleted")
            log.info("device taint rule deleted", extra={"node": self._node, "rule": name})

    # -- device plugin: evictions -------------------------------------------------------------

    async def _evict_holders(self, gpus: set[int], uuids: Mapping[int, str]) -> bool:
        """Evict the pods holding ``gpus``; False when some eviction was refused."""
        if not gpus or self._pod_resources is None:
            self._evicting.clear()
            return True
        ids = [uuids[gpu] for gpu in sorted(gpus) if gpu in uuids]
        holders = await self._pod_resources.pods_holding(GPU_RESOURCE, ids)
        held = {(pod.namespace, pod.name) for pod in holders}
        self._evicting &= held  # gone: a later pod of that name is a new holder
        done = True
        for namespace, name in sorted(held - self._evicting):
            if await self._evict(namespace, name):
                self._evicting.add((namespace, name))
            else:
                done = False
        return done

    async def _evict(self, namespace: str, name: str) -> bool:
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        try:
            await self._client.create(
                PODS, body, namespace=namespace, name=name, subresource="eviction"
            )
        except KubeApiError as exc:
            if exc.not_found:
                return True
            if exc.code == 429:  # a disruption budget: asked again at the next evaluation
                self._count("eviction", "refused")
                return False
            raise
        self._count("eviction")
        log.warning(
            "evicted a pod holding a faulted GPU",
            extra={"node": self._node, "pod": f"{namespace}/{name}"},
        )
        return True

    def _count(self, kind: str, result: str = "ok") -> None:
        self._metrics.gpu_actions.labels(kind, result).inc()


def _taint(rule: DeviceTaintRule) -> dict[str, str]:
    taint = rule.spec.taint
    return {"key": taint.key, "value": taint.value, "effect": taint.effect}
