"""The clique allocator assembled: informers and webhook on every replica, placing on the leader.

Every replica lists and watches and serves the pod webhook (a replica is ready once its caches
are synced and the webhook listens). Only the holder of the Lease reconciles, writes Placements,
pins pods and publishes capacity events. When it becomes leader it reads the capacity snapshots
of the KV bucket, queues every domain and every Placement, and runs the reconcile loop and the
capacity publisher. Losing the Lease raises LeadershipLostError, which ends the process.

Which changes queue which domains (``route``):

- a ComputeDomain: itself;
- a Placement: itself, when the change was not the leader's own write (and then the view is
  rebuilt and waiting gangs try again);
- a pod: the domains whose template its claims name, when its phase, gates, pin, node, GPUs,
  owner or deletion changed; a pod outside every Placement that starts or stops holding GPUs on
  a node also changes capacity;
- a node: the domains with a member on it, when its clique, GPUs, slot, health or
  schedulability changed (heartbeats do nothing); capacity changes with it;
- a ReplicaSet, StatefulSet or Job: the domains of its pods, when the size it wants changed.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from services.clique_allocator.caches import (
    BY_NODE,
    Caches,
    gpu_node,
    owner_uid,
    pod_template_keys,
)
from services.clique_allocator.gang import workload_pods
from services.clique_allocator.nodes import node_facts
from services.clique_allocator.objects import Workload, finished, gated, pinned_to
from services.clique_allocator.publisher import CapacityPublisher
from services.clique_allocator.reconciler import AllocatorReconciler
from services.clique_allocator.settings import CliqueAllocatorSettings
from services.clique_allocator.state import ClusterState
from services.clique_allocator.webhook.server import WebhookServer
from services.clique_allocator.webhook.templates import TemplateClassifier
from services.clique_allocator.writes import AllocatorWrites
from shared.crds.computedomain import ComputeDomain
from shared.crds.names import GPU_RESOURCE
from shared.crds.placement import Placement
from shared.kube.client import KubeClient
from shared.kube.keys import ObjectKey
from shared.kube.leader import LeaderElector
from shared.kube.meta import KubeObject
from shared.kube.ownwrites import OwnWrites
from shared.kube.models import Node, Pod
from shared.kube.reconcile import ReconcileRunner
from shared.kube.recorder import EventRecorder
from shared.kube.workqueue import WorkQueue
from shared.runtime import ServiceContext

log = logging.getLogger("cdo.clique_allocator")

COMPONENT = "clique-allocator"
QUEUE = "placements"


def _key(obj: KubeObject) -> ObjectKey:
    return ObjectKey(namespace=obj.metadata.namespace, name=obj.metadata.name)


def pod_facts(pod: Pod) -> tuple[Any, ...]:
    """What a domain's reconcile depends on about a pod."""
    return (
        finished(pod),
        gated(pod),
        pinned_to(pod),
        pod.spec.node_name,
        pod.metadata.deletion_timestamp is not None,
        pod.gpus(GPU_RESOURCE),
        tuple(pod_template_keys(pod)),
        tuple(owner_uid(pod)),
    )


class CliqueAllocator:
    """Informers, webhook, queue, reconciler, publisher and leader election of one replica."""

    def __init__(
        self, ctx: ServiceContext, *, client: KubeClient, settings: CliqueAllocatorSettings
    ) -> None:
        self._ctx = ctx
        self._client = client
        self._settings = settings
        self.caches = Caches(client, settings=settings, metrics=ctx.metrics)
        self.book = OwnWrites[Placement]()
        self.state = ClusterState(self.caches, self.book)
        self.queue = WorkQueue[ObjectKey](
            name=QUEUE, metrics=ctx.metrics, rate_limit=settings.retries
        )
        self.publisher = CapacityPublisher(
            bus=ctx.bus, state=self.state, interval_s=settings.capacity_interval_s
        )
        self.reconciler = AllocatorReconciler(
            caches=self.caches,
            state=self.state,
            book=self.book,
            writes=AllocatorWrites(client, field_manager=settings.api.field_manager),
            recorder=EventRecorder(
                client, component=COMPONENT, instance=ctx.instance, metrics=ctx.metrics
            ),
            metrics=ctx.metrics,
            tracer=ctx.tracer,
            on_capacity_change=self.publisher.poke,
            pod_writes=settings.pod_writes,
            resync_s=settings.loop.resync_s,
            retry_waiting_s=settings.retry_waiting_s,
        )
        self.reconciler.wake_waiting = self.wake_waiting
        self.runner = ReconcileRunner(
            name=QUEUE,
            queue=self.queue,
            reconcile=self.reconciler.reconcile,
            metrics=ctx.metrics,
            settings=settings.loop.runner,
        )
        self.webhook: WebhookServer | None = None
        if settings.webhook.enabled:
            self.webhook = WebhookServer(
                settings=settings.webhook,
                classifier=TemplateClassifier(
                    self.caches, client, timeout_s=settings.webhook.lookup_timeout_s
                ),
                synced=lambda: self.caches.webhook_synced,
                metrics=ctx.metrics,
            )
        self.elector = LeaderElector(
            client,
            namespace=settings.lease.namespace,
            name=settings.lease.name,
            identity=ctx.instance,
            settings=settings.leader_election,
        )
        self.route()

    def start(self) -> None:
        """Register the root tasks and shutdown steps with the service's supervisor."""
        supervisor = self._ctx.supervisor
        for informer in self.caches.informers:
            supervisor.start(f"{informer.resource.plural} informer", informer.run())
        self._ctx.readiness.add("caches synced", lambda: self.caches.synced)
        if self.webhook is not None:
            webhook = self.webhook
            supervisor.start("webhook", webhook.run())
            self._ctx.readiness.add("webhook serving", lambda: webhook.serving)
        supervisor.start("leader election", self.elector.run(self._lead))
        supervisor.on_shutdown("drain placements", self.runner.drain, phase="intake")
        supervisor.on_shutdown("close kube client", self._client.close, phase="final")

    async def _lead(self) -> None:
        await self.caches.wait_synced()
        self.state.invalidate()
        await self.publisher.load()
        keys = {_key(domain) for domain in self.caches.domains.cache.objects()}
        keys |= {_key(placement) for placement in self.caches.placements.cache.objects()}
        log.info("leading", extra={"domains": len(keys), "nodes": len(self.caches.nodes.cache)})
        for key in sorted(keys):
            self.queue.add(key)
        async with asyncio.TaskGroup() as loops:
            loops.create_task(self.runner.run(), name="placements reconcile")
            loops.create_task(self.publisher.run(), name="capacity publisher")

    # -- routing changes to keys -------------------------------------------------------------

    def wake_waiting(self) -> None:
        """Queue every domain that waits for capacity, oldest first."""

        def created(key: ObjectKey) -> str:
            domain = self.caches.domain(key)
            stamp = domain.metadata.creation_timestamp if domain is not None else None
            return stamp.isoformat() if stamp is not None else ""

        for key in sorted(self.reconciler.waiting, key=lambda k: (created(k), str(k))):
            self.queue.add(key)

    def _capacity_changed(self, *, grew: bool) -> None:
        self.state.invalidate()
        self.publisher.poke()
        if grew:
            self.wake_waiting()

    def _recorded(self, pod: Pod) -> bool:
        """The pod is named in its domain's Placement."""
        for key in self.caches.domains_of(pod):
            text = str(key)
            placement = self.book.current(text, self.caches.placements.cache.get(text))
            if placement is not None and pod.metadata.name in placement.spec.pod_names:
                return True
        return False

    def route(self) -> None:
        """Add the handlers that queue the keys each change concerns."""
        queue = self.queue
        caches = self.caches

        def on_domain(old: ComputeDomain | None, new: ComputeDomain | None) -> None:
            for obj in (old, new):
                if obj is not None:
                    queue.add(_key(obj))

        def on_placement(old: Placement | None, new: Placement | None) -> None:
            if self.book.observe(old, new):
                self._capacity_changed(grew=True)
                obj = new or old
                assert obj is not None
                queue.add(_key(obj))

        def on_pod(old: Pod | None, new: Pod | None) -> None:
            if old is None or new is None or pod_facts(old) != pod_facts(new):
                keys = {key for pod in (old, new) if pod for key in caches.domains_of(pod)}
                for key in sorted(keys):
                    queue.add(key)
            before = gpu_node(old) if old is not None else []
            after = gpu_node(new) if new is not None else []
            pod = new or old
            if before != after and pod is not None and not self._recorded(pod):
                self._capacity_changed(grew=bool(before))

        def on_node(old: Node | None, new: Node | None) -> None:
            before = node_facts(old) if old is not None else None
            after = node_facts(new) if new is not None else None
            if before == after:
                return
            self._capacity_changed(grew=after is not None)
            node = new or old
            assert node is not None
            for placement in caches.placements.cache.by_index(BY_NODE, node.metadata.name):
                queue.add(_key(placement))

        def on_workload(kind: str) -> Any:
            def handler(old: Workload | None, new: Workload | None) -> None:
                if (
                    old is not None
                    and new is not None
                    and workload_pods(kind, old) == workload_pods(kind, new)
                ):
                    return
                workload = new or old
                assert workload is not None
                keys = {
                    key
                    for pod in caches.pods_owned_by(workload.metadata.uid)
                    for key in caches.domains_of(pod)
                }
                for key in sorted(keys):
                    queue.add(key)

            return handler

        caches.domains.add_handler(on_domain)
        caches.placements.add_handler(on_placement)
        caches.pods.add_handler(on_pod)
        caches.nodes.add_handler(on_node)
        for kind, informer in caches.workloads.items():
            informer.add_handler(on_workload(kind))
